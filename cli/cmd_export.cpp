// tessera export / import: weights exchange with Python (PyTorch).
//
//   tessera export --checkpoint RUN/checkpoints/last.pt --out model.pt   [--arch model.json]
//   tessera import --weights model.pt [--arch model.json] --out checkpoint.pt
//
// model.pt is a dict {state_dict name → tensor} that Python's torch.load reads (the names
// are UNetImpl's: enc0.conv0.weight, enc0.norm0.running_mean, up0.weight, head.bias, …);
// model.json carries the architecture, the input normalisation and the class names.
// python/tessera_unet.py rebuilds the same network in PyTorch from the pair. Import takes
// what Python's `torch.save(net.state_dict(), path)` writes, checks every name and shape
// against the architecture, and writes a checkpoint that `tessera infer --checkpoint` uses.
//
// `export --example-input IN.pt --example-output OUT.pt` also runs the network (eval mode)
// on a seeded random input and saves input and logits, so a Python port can be checked
// against Tessera on the same numbers (tests/export/).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "commands.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/core/checkpoint.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/pickle.hpp"
#include "tessera/run/run_writer.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kArchFormat = "tessera-model";
constexpr int kArchVersion = 1;

struct ExportFlags {
  std::string checkpoint, out, arch, example_input, example_output;
  std::optional<int64_t> example_size;
  int64_t example_batch = 2;
  uint64_t example_seed = 0;
};

struct ImportFlags {
  std::string weights, arch, out;
};

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// model.json beside model.pt unless given.
std::string default_arch(const std::string& weights) { return fs::path(weights).replace_extension(".json").string(); }

// Staged (tessera/run/staged_file.hpp): a crash never leaves half a file under the name.
void save_tensor_file(const std::string& path, const c10::IValue& value) {
  const std::vector<char> bytes = torch::pickle_save(value);
  write_file_atomically(path, {std::string_view(bytes.data(), bytes.size())});
}

// ---- model.json ------------------------------------------------------------------------

// The checkpoint's description (checkpoint.hpp's JSON) plus what a Python reader needs to
// choose inputs; the trainer's private resume state stays out.
nlohmann::json arch_to_json(const CheckpointMeta& m) {
  const UNetOptions& o = m.model;
  nlohmann::json j = m;
  j.erase("trainer_state");
  j["format"] = kArchFormat;
  j["version"] = kArchVersion;
  j["layout"] = o.dims == 2 ? "NCHW" : "NCDHW";
  // For the caller choosing input sizes; derived, ignored on import.
  j["geometry"] = {{"halo", unet_halo(o)}, {"alignment", unet_alignment(o)}, {"remainder", unet_remainder(o)}};
  j["normalization"]["formula"] = "x' = (x - offset) / scale";
  return j;
}

CheckpointMeta arch_from_json(const std::string& path) {
  if (!fs::is_regular_file(path)) throw Error(path + ": no such architecture file (model.json from tessera export)");
  std::ifstream in(path);
  CheckpointMeta m;
  try {
    const auto j = nlohmann::json::parse(in);
    if (!j.is_object() || j.value("format", "") != kArchFormat)
      throw Error(path + ": not a Tessera model description (\"format\": \"" + kArchFormat + "\" missing)");
    if (j.at("version").get<int>() > kArchVersion)
      throw Error(path + ": model description version " + std::to_string(j.at("version").get<int>()) +
                  " is newer than this build understands (" + std::to_string(kArchVersion) + ")");
    m = j.get<CheckpointMeta>();
    m.trainer_state.clear();
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": model description is damaged (" + first_line(e.what()) + ")");
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind(path, 0) == 0) throw;
    throw Error(path + ": " + msg);
  }
  try {
    m.model.validate();
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  const auto channels = static_cast<size_t>(m.model.in_channels);
  if (m.norm.offset.size() != channels || m.norm.scale.size() != channels)
    throw Error(path + ": normalization.offset/scale need " + std::to_string(channels) + " values (in_channels)");
  if (m.class_names.size() != static_cast<size_t>(m.model.classes))
    throw Error(path + ": class_names has " + std::to_string(m.class_names.size()) + " names but model.classes is " +
                std::to_string(m.model.classes));
  return m;
}

// ---- model.pt --------------------------------------------------------------------------

/// Parameters then buffers, under the names Python's state_dict uses.
std::vector<std::pair<std::string, torch::Tensor>> named_state(UNet& net) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : net->named_parameters()) out.emplace_back(p.key(), p.value());
  for (const auto& b : net->named_buffers()) out.emplace_back(b.key(), b.value());
  return out;
}

/// A dict of tensors written by Python's torch.save or torch::pickle_save.
std::vector<std::pair<std::string, torch::Tensor>> read_weights(const std::string& path) {
  if (!fs::is_regular_file(path)) throw Error(path + ": no such weights file");
  const std::string hint = "; save a dict of tensors with torch.save(net.state_dict(), path)";
  c10::IValue value;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    if (!reader.hasRecord("data.pkl")) throw Error(path + ": not a torch.save file (no data.pkl inside)" + hint);
    auto [pkl_ptr, pkl_size] = reader.getRecord("data.pkl");
    const std::string pkl = io::plain_dict_pickle(std::string(static_cast<const char*>(pkl_ptr.get()), pkl_size));
    size_t pos = 0;
    auto read = [&](char* buf, size_t n) {
      n = std::min(n, pkl.size() - pos);
      std::memcpy(buf, pkl.data() + pos, n);
      pos += n;
      return n;
    };
    auto read_record = [&](const std::string& name) { return std::get<0>(reader.getRecord("data/" + name)); };
    torch::jit::Unpickler unpickler(read, nullptr, nullptr, read_record, c10::Device(c10::kCPU));
    unpickler.set_version(reader.version());
    value = unpickler.parse_ivalue();
  } catch (const c10::Error& e) {
    const std::string msg = first_line(e.what_without_backtrace());
    if (msg.find("zip archive") != std::string::npos)
      throw Error(path + ": not a readable torch.save file (truncated, or the legacy non-zip format)");
    throw Error(path + ": cannot read weights (" + msg + ")" + hint);
  }
  if (!value.isGenericDict()) throw Error(path + ": holds a " + value.tagKind() + ", not a dict of tensors" + hint);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& e : value.toGenericDict()) {
    if (!e.key().isString()) throw Error(path + ": a key is a " + e.key().tagKind() + ", not a parameter name");
    if (!e.value().isTensor())
      throw Error(path + ": '" + e.key().toStringRef() + "' is a " + e.value().tagKind() + ", not a tensor");
    out.emplace_back(e.key().toStringRef(), e.value().toTensor());
  }
  return out;
}

std::string shape_str(c10::IntArrayRef s) { return c10::str(s); }

// ---- export ----------------------------------------------------------------------------

// Smallest input side (≥ 2 alignment) for which the network yields an output of at least
// one alignment step: big enough that every level sees more than one pixel.
int64_t example_side(const UNetOptions& o) {
  const int64_t a = unet_alignment(o);
  for (int64_t in = 2 * a; in < 4096; ++in)
    if (auto out = unet_output_size(o, in); out && *out >= a) return in;
  throw Error("export: no valid example input size for this network");
}

void run_export(const ExportFlags& f) {
  if (f.example_input.empty() != f.example_output.empty())
    throw Error("export: give both --example-input and --example-output, or neither");
  const std::string arch = f.arch.empty() ? default_arch(f.out) : f.arch;
  if (fs::absolute(arch) == fs::absolute(f.out)) throw Error(arch + ": --arch must differ from --out");
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
              o.levels, o.base_filters,
              to_string(o.padding).c_str(), to_string(o.norm).c_str(), to_string(o.decoder).c_str(), arch.c_str());

  if (f.example_input.empty()) return;
  const int64_t side = f.example_size.value_or(example_side(o));
  if (!unet_output_size(o, side))
    throw Error("--example-size " + std::to_string(side) + ": not a valid input side for this network");
  if (f.example_batch < 1) throw Error("--example-batch: must be >= 1");
  std::vector<int64_t> shape{f.example_batch, o.in_channels};
  for (int d = 0; d < o.dims; ++d) shape.push_back(side);
  torch::manual_seed(f.example_seed);
  const torch::Tensor x = torch::randn(shape);
  torch::Tensor y;
  {
    torch::NoGradGuard no_grad;
    y = ck.net->forward(x).contiguous();
  }
  save_tensor_file(f.example_input, c10::IValue(x));
  save_tensor_file(f.example_output, c10::IValue(y));
  std::printf("%s: example input %s (seed %llu)\n%s: logits %s\n", f.example_input.c_str(), shape_str(x.sizes()).c_str(),
              (unsigned long long)f.example_seed, f.example_output.c_str(), shape_str(y.sizes()).c_str());
}

// ---- import ----------------------------------------------------------------------------

void run_import(const ImportFlags& f) {
  const std::string arch = f.arch.empty() ? default_arch(f.weights) : f.arch;
  CheckpointMeta meta = arch_from_json(arch);
  const auto loaded = read_weights(f.weights);
  std::map<std::string, torch::Tensor> given(loaded.begin(), loaded.end());
  UNet net(meta.model);
  const auto expected = named_state(net);
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
  if (given.size() != expected.size()) {
    std::set<std::string> known;
    for (const auto& e : expected) known.insert(e.first);
    for (const auto& [name, t] : loaded)
      if (!known.count(name))
        throw Error(f.weights + ": unexpected '" + name + "' (not a parameter of the network in " + arch + ")");
  }
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, target] : expected) target.copy_(given.at(name).to(torch::kCPU, torch::kFloat));
  }
  write_checkpoint_file(f.out, checkpoint_bytes(net, meta));
  std::printf("%s: checkpoint of a %d-D %s from %zu tensors in %s\n", f.out.c_str(), meta.model.dims,
              meta.model.is_builtin() ? "U-Net" : meta.model.name.c_str(), expected.size(), f.weights.c_str());
}

}  // namespace

void register_export(CLI::App& app) {
  static ExportFlags ef;
  auto* ex = app.add_subcommand("export", "Write a checkpoint's weights for Python: model.pt (torch.load) + model.json");
  ex->add_option("--checkpoint", ef.checkpoint, "Tessera checkpoint (RUN/checkpoints/last.pt)")->required();
  ex->add_option("--out", ef.out, "Weights file: a dict of tensors that Python's torch.load reads")->required();
  ex->add_option("--arch", ef.arch, "Architecture, normalisation and class names (default: OUT with .json)");
  ex->add_option("--example-input", ef.example_input, "Also save a seeded random input tensor here (for checks)");
  ex->add_option("--example-output", ef.example_output, "... and the network's logits on it (eval mode) here");
  ex->add_option("--example-size", ef.example_size, "Example input side (default: smallest comfortable valid side)");
  ex->add_option("--example-batch", ef.example_batch, "Example batch size (default 2)");
  ex->add_option("--example-seed", ef.example_seed, "Seed of the example input (default 0)");
  ex->callback([] { run_export(ef); });

  static ImportFlags imf;
  auto* im = app.add_subcommand("import", "Make a Tessera checkpoint from weights saved by Python (torch.save)");
  im->add_option("--weights", imf.weights, "torch.save(net.state_dict(), ...) file, names as tessera export writes")
      ->required();
  im->add_option("--arch", imf.arch, "model.json from tessera export (default: WEIGHTS with .json)");
  im->add_option("--out", imf.out, "Checkpoint to write (usable by tessera infer --checkpoint)")->required();
  im->callback([] { run_import(imf); });
}

}  // namespace tessera::cli
