// tessera-gpu-check: flags → GpuCheckOptions → the steps of gpu_check.hpp → one JSON report
// (written whole or not at all). Exit 0 when every step passed, 1 on bad flags or an error,
// 2 when a step failed. scripts/gpu_check.sh builds and runs it on a GPU machine.
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "gpu_check.hpp"
#include "options_cli.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/torch_compat.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::gpu_check {

namespace {

// Runs one step, turning an exception into a failed step that says why.
template <class F>
nlohmann::json step(const char* name, F&& f) {
  std::cerr << "tessera-gpu-check: " << name << "\n";
  try {
    return f();
  } catch (const c10::Error& e) {  // LibTorch's message without its stack
    return {{"error", e.what_without_backtrace()}, {"pass", false}};
  } catch (const std::exception& e) {
    return {{"error", e.what()}, {"pass", false}};
  }
}

nlohmann::json run(const GpuCheckOptions& o) {
  const torch::Device device = o.device == "cuda" ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (device.is_cuda() && !torch::cuda::is_available())
    throw Error("--device cuda: no CUDA device is visible to this LibTorch (" TORCH_VERSION ")");
  torch_compat::allow_tf32(false);  // fp32 means IEEE fp32 in every step, on both sides
  const std::filesystem::path work = std::filesystem::path(o.out).replace_extension(".work");
  std::filesystem::create_directories(work);
  TelemetrySampler telemetry(device);
  nlohmann::json j{{"libtorch", TORCH_VERSION},
                   {"libtorch_cuda", bool(TESSERA_TORCH_CUDA)},
                   {"device", device_name(device)},
                   {"device_kind", o.device},
                   {"tf32", false},
                   {"cpu_threads", at::get_num_threads()},
                   {"model", {{"levels", o.model.levels}, {"convs_per_level", o.model.convs_per_level},
                              {"base_filters", o.model.base_filters}, {"in_channels", o.model.in_channels},
                              {"classes", o.model.classes}}}};
  j["equality"] = step("equality", [&] { return check_equality(o, device); });
  j["training"] = step("training", [&] { return check_training(o, device, work.string()); });
  j["throughput"] = step("throughput", [&] { return check_throughput(o, device, work.string()); });
  j["comm"] = step("comm", [&] { return check_comm(device); });
  j["telemetry"] = telemetry.stop();
  std::filesystem::remove_all(work);
  bool pass = true;
  for (const char* s : {"equality", "training", "throughput", "comm", "telemetry"}) pass = pass && j[s]["pass"].get<bool>();
  j["pass"] = pass;
  return j;
}

}  // namespace
}  // namespace tessera::gpu_check

int main(int argc, char** argv) {
  using namespace tessera;
  gpu_check::GpuCheckOptions o;
  CLI::App app{"Tessera on one CUDA device against its CPU and against PyTorch eager (docs/gpu.md)"};
  cli::add_field_flags(&app, o);
  CLI11_PARSE(app, argc, argv);
  try {
    o.validate();
    configure_threads();
    const nlohmann::json report = gpu_check::run(o);
    const std::string text = report.dump(2) + "\n";
    write_file_atomically(o.out, {text});
    std::cout << o.out << ": " << (report["pass"].get<bool>() ? "pass" : "FAIL") << " (" << report["device"].get<std::string>()
              << ", LibTorch " << report["libtorch"].get<std::string>() << ")\n";
    return report["pass"].get<bool>() ? 0 : 2;
  } catch (const std::exception& e) {
    std::cerr << "tessera-gpu-check: " << e.what() << "\n";
    return 1;
  }
}
