// Inputs for the PyTorch reference and one run of it (popen: the GPU machine has no MPI and
// the check no child-process library; the reference prints one JSON line last).
#include "reference.hpp"

#include <cstdio>
#include <memory>

#include <torch/serialize.h>
#include <torch/torch.h>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/tensor_io.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::gpu_check {
namespace {

void save(const std::string& path, const c10::IValue& value) {
  const std::vector<char> bytes = torch::pickle_save(value);
  write_file_atomically(path, {std::string_view(bytes.data(), bytes.size())});
}

// What python/tessera_unet.py reads (engine/src/exchange writes the same for `tessera export`).
nlohmann::json model_description(const UNetOptions& model) {
  CheckpointMeta meta;
  meta.model = model;
  meta.norm = identity_normalization(model.in_channels);
  for (int c = 0; c < model.classes; ++c) meta.class_names.push_back("class" + std::to_string(c));
  nlohmann::json j = meta;
  j["format"] = "tessera-model";
  j["version"] = 1;
  j["geometry"] = {{"halo", unet_halo(model)}, {"alignment", unet_alignment(model)}, {"remainder", unet_remainder(model)}};
  return j;
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

void write_reference_inputs(UNet& net, const torch::Tensor& scene, const std::string& work_dir) {
  c10::Dict<std::string, at::Tensor> state;
  for (const auto& p : net->named_parameters()) state.insert(p.key(), p.value().detach().to(torch::kCPU).contiguous());
  for (const auto& b : net->named_buffers()) state.insert(b.key(), b.value().detach().to(torch::kCPU).contiguous());
  save(work_dir + "/model.pt", state);
  const std::string json = model_description(net->options()).dump(2) + "\n";
  write_file_atomically(work_dir + "/model.json", {json});
  save(work_dir + "/scene.pt", scene.contiguous());
}

nlohmann::json run_reference(const GpuCheckOptions& o, torch::Device device, const std::string& precision,
                             const std::string& work_dir) {
  const std::string command = quoted(o.python) + " " + quoted(o.reference) + " " + quoted(work_dir + "/scene.pt") +
                              " --weights " + quoted(work_dir + "/model.pt") + " --roi " + std::to_string(o.tile) +
                              " --overlap " + std::to_string(o.overlap) + " --batch " + std::to_string(o.batch) +
                              " --repeats " + std::to_string(o.repeats) + " --device " + (device.is_cuda() ? "cuda" : "cpu") +
                              " --precision " + precision + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return {{"error", "cannot start: " + command}};
  std::string out, last;
  char buf[4096];
  while (fgets(buf, sizeof buf, pipe.get())) out += buf;
  const int status = pclose(pipe.release());
  if (const size_t end = out.find_last_not_of('\n'); end != std::string::npos) {
    const size_t newline = out.rfind('\n', end);
    const size_t start = newline == std::string::npos ? 0 : newline + 1;
    last = out.substr(start, end - start + 1);
  }
  if (status != 0 || last.empty() || last[0] != '{')
    return {{"error", "exit status " + std::to_string(status) + ": " + out.substr(out.size() > 2000 ? out.size() - 2000 : 0)},
            {"command", command}};
  nlohmann::json j = nlohmann::json::parse(last, nullptr, false);
  if (j.is_discarded()) return {{"error", "not JSON: " + last}, {"command", command}};
  j["command"] = command;
  return j;
}

}  // namespace tessera::gpu_check
