#pragma once
// tessera-gpu-check: Tessera on one CUDA device against the CPU and against PyTorch eager on
// the same device (scripts/gpu_check.sh runs it; docs/gpu.md). Each step returns its part of
// the JSON report with "pass" (true / false) and the figures behind it; `--device cpu` runs
// every step on the CPU (the dry run that ctest runs), comparing the CPU with itself.
//   equality    U-Net forward and backward on the device against the CPU (fp32, TF32 off);
//               tiled inference against one whole-image pass, both on the device
//   training    per-step losses of a few training steps, device against CPU
//   throughput  Tessera's tiled inference of a scene (fp32, bf16) against the PyTorch
//               reference (bench/reference/sliding_window.py) on the same device: seconds,
//               peak device memory, useful TFLOP/s, % of the device's peak
//   comm        the NCCL communicator's collectives with one rank
//   telemetry   NVML readings taken while the other steps ran
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "gpu_check_options.hpp"
#include "tessera/core/unet.hpp"

namespace tessera::gpu_check {

nlohmann::json check_equality(const GpuCheckOptions& o, torch::Device device);
nlohmann::json check_training(const GpuCheckOptions& o, torch::Device device, const std::string& work_dir);
nlohmann::json check_throughput(const GpuCheckOptions& o, torch::Device device, const std::string& work_dir);
nlohmann::json check_comm(torch::Device device);

/// Reads the device (NVML; the host on the CPU) every 0.2 s on a thread of its own from
/// construction until stop(), which returns the summary: samples, peaks, NVML's note.
class TelemetrySampler {
 public:
  explicit TelemetrySampler(torch::Device device);
  ~TelemetrySampler();
  TelemetrySampler(const TelemetrySampler&) = delete;
  TelemetrySampler& operator=(const TelemetrySampler&) = delete;
  nlohmann::json stop();

 private:
  void sample();
  const bool gpu_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopped_ = false;
  nlohmann::json summary_;
  std::thread thread_;
};

// ---- device.cpp: what the steps share ---------------------------------------------------

/// A U-Net of `o.model` with weights from seed `seed`, on the CPU.
UNet seeded_unet(const GpuCheckOptions& o, uint64_t seed);
/// A copy of `net` (weights and buffers) on `device`.
UNet copy_to(UNet& net, torch::Device device);
/// Waits for the work queued on `device` (no-op on the CPU).
void synchronize(torch::Device device);
/// Resets the device's peak-memory statistic (CUDA caching allocator; CPU: the process's VmHWM).
void reset_peak_memory(torch::Device device);
/// Peak bytes allocated since reset_peak_memory (CUDA: by tensors; CPU: resident growth).
int64_t peak_memory_bytes(torch::Device device);
/// The device's product name ("cpu" on the CPU).
std::string device_name(torch::Device device);
/// The device's peak TFLOP/s for `precision` (fp32 on CUDA cores, bf16 dense tensor cores):
/// the flag when given, else a table of known devices; 0 when unknown.
double device_peak_tflops(const GpuCheckOptions& o, torch::Device device, const std::string& precision);
/// max |a − b| / max |b| (0 when both are zero); both moved to the CPU in double.
double relative_difference(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace tessera::gpu_check
