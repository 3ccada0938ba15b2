// `tessera export` and `tessera import` (weights_exchange.hpp).
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "exchange_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/weights_exchange.hpp"
#include "tessera/run/run_writer.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::engine {
namespace {

namespace fs = std::filesystem;
using namespace exchange;

// Smallest input side (≥ 2 alignment) for which the network yields an output of at least
// one alignment step: big enough that every level sees more than one pixel.
int64_t example_side(const UNetOptions& o) {
  const int64_t a = unet_alignment(o);
  for (int64_t in = 2 * a; in < 4096; ++in)
    if (auto out = unet_output_size(o, in); out && *out >= a) return in;
  throw Error("export: no valid example input size for this network");
}

// --example-input / --example-output: the network's logits on a seeded random input.
void write_examples(const ExportOptions& f, UNet& net, const UNetOptions& o) {
  const int64_t side = f.example_size > 0 ? f.example_size : example_side(o);
  if (!unet_output_size(o, side))
    throw Error("--example-size " + std::to_string(side) + ": not a valid input side for this network");
  std::vector<int64_t> shape{f.example_batch, o.in_channels};
  for (int d = 0; d < o.dims; ++d) shape.push_back(side);
  torch::manual_seed(f.example_seed);
  const torch::Tensor x = torch::randn(shape);
  torch::Tensor y;
  {
    torch::NoGradGuard no_grad;
    y = net->forward(x).contiguous();
  }
  save_tensor_file(f.example_input, c10::IValue(x));
  save_tensor_file(f.example_output, c10::IValue(y));
  std::printf("%s: example input %s (seed %llu)\n%s: logits %s\n", f.example_input.c_str(), shape_str(x.sizes()).c_str(),
              (unsigned long long)f.example_seed, f.example_output.c_str(), shape_str(y.sizes()).c_str());
}

// Every tensor the network needs, by name and shape, and nothing else. Throws naming the tensor.
void check_weights(const ImportOptions& f, const std::string& arch,
                   const std::vector<std::pair<std::string, torch::Tensor>>& loaded,
                   const std::map<std::string, torch::Tensor>& given,
                   const std::vector<std::pair<std::string, torch::Tensor>>& expected) {
  for (const auto& [name, target] : expected) {
    auto it = given.find(name);
    if (it == given.end()) throw Error(f.weights + ": missing '" + name + "' (shape " + shape_str(target.sizes()) + ")");
    const torch::Tensor& t = it->second;
    if (t.sizes() != target.sizes())
      throw Error(f.weights + ": '" + name + "' has shape " + shape_str(t.sizes()) + ", " + arch + " needs " +
                  shape_str(target.sizes()));
    if (!t.is_floating_point())
      throw Error(f.weights + ": '" + name + "' is " + std::string(c10::toString(t.scalar_type())) + ", not floating point");
  }
  if (given.size() == expected.size()) return;
  std::set<std::string> known;
  for (const auto& e : expected) known.insert(e.first);
  for (const auto& [name, t] : loaded)
    if (!known.count(name))
      throw Error(f.weights + ": unexpected '" + name + "' (not a parameter of the network in " + arch + ")");
}

}  // namespace

void ExportOptions::validate() const {
  if (checkpoint.empty()) throw Error("export: --checkpoint is required");
  if (out.empty()) throw Error("export: --out is required");
  if (example_input.empty() != example_output.empty())
    throw Error("export: give both --example-input and --example-output, or neither");
  const std::string a = arch.empty() ? default_arch(out) : arch;
  if (fs::absolute(a) == fs::absolute(out)) throw Error(a + ": --arch must differ from --out");
  if (example_input.empty()) return;
  if (example_size < 0) throw Error("--example-size " + std::to_string(example_size) + ": must be >= 0 (0: the default)");
  if (example_batch < 1) throw Error("--example-batch: must be >= 1");
}

void ImportOptions::validate() const {
  if (weights.empty()) throw Error("import: --weights is required");
  if (out.empty()) throw Error("import: --out is required");
}

void export_weights(const ExportOptions& f) {
  f.validate();
  const std::string arch = f.arch.empty() ? default_arch(f.out) : f.arch;
  LoadedCheckpoint ck = load_checkpoint(f.checkpoint);
  ck.net->eval();
  c10::Dict<std::string, at::Tensor> state;
  int64_t values = 0;
  for (const auto& [name, t] : named_state(ck.net)) {
    state.insert(name, t.detach().to(torch::kCPU).contiguous().clone());
    values += t.numel();
  }
  save_tensor_file(f.out, c10::IValue(state));
  const std::string json = arch_to_json(ck.meta).dump(2) + "\n";
  write_file_atomically(arch, {json});
  const UNetOptions& o = ck.meta.model;
  std::printf("%s: %zu tensors, %lld values (%d-D %s L=%d f=%d, %s padding, %s norm, %s decoder)\n%s: architecture\n",
              f.out.c_str(), state.size(), (long long)values, o.dims, o.is_builtin() ? "U-Net" : o.name.c_str(),
              o.levels, o.base_filters, to_string(o.padding).c_str(), to_string(o.norm).c_str(),
              to_string(o.decoder).c_str(), arch.c_str());
  if (!f.example_input.empty()) write_examples(f, ck.net, o);
}

void import_weights(const ImportOptions& f) {
  f.validate();
  const std::string arch = f.arch.empty() ? default_arch(f.weights) : f.arch;
  CheckpointMeta meta = arch_from_json(arch);
  const auto loaded = read_weights(f.weights);
  const std::map<std::string, torch::Tensor> given(loaded.begin(), loaded.end());
  UNet net(meta.model);
  const auto expected = named_state(net);
  check_weights(f, arch, loaded, given, expected);
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, target] : expected) target.copy_(given.at(name).to(torch::kCPU, torch::kFloat));
  }
  write_checkpoint_file(f.out, checkpoint_bytes(net, meta));
  std::printf("%s: checkpoint of a %d-D %s from %zu tensors in %s\n", f.out.c_str(), meta.model.dims,
              meta.model.is_builtin() ? "U-Net" : meta.model.name.c_str(), expected.size(), f.weights.c_str());
}

}  // namespace tessera::engine
