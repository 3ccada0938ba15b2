// What the check's steps share: seeded networks, copies across devices, synchronisation,
// peak memory, the device's name and peak.
#include <optional>
#include <string>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "gpu_check.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/process_memory.hpp"

#if TESSERA_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace tessera::gpu_check {
namespace {

#if !TESSERA_TORCH_CUDA
[[noreturn]] void no_cuda(const char* what) {
  throw Error(std::string(what) + ": this build's LibTorch has no CUDA (configure against a CUDA LibTorch, docs/gpu.md)");
}
#endif

std::optional<PeakMemoryMeter>& host_meter() {
  static std::optional<PeakMemoryMeter> meter;
  return meter;
}

}  // namespace

UNet seeded_unet(const GpuCheckOptions& o, uint64_t seed) {
  torch::manual_seed(seed);
  return UNet(o.model);
}

UNet copy_to(UNet& net, torch::Device device) {
  UNet copy(net->options());
  torch::NoGradGuard no_grad;
  auto src = net->named_parameters(), dst = copy->named_parameters();
  for (const auto& p : src) dst[p.key()].copy_(p.value());
  auto src_b = net->named_buffers(), dst_b = copy->named_buffers();
  for (const auto& b : src_b) dst_b[b.key()].copy_(b.value());
  copy->to(device);
  return copy;
}

void synchronize(torch::Device device) {
  if (!device.is_cuda()) return;
  torch::cuda::synchronize(device.index() < 0 ? -1 : device.index());
}

// The caching allocator's statistics: index 0 of each stat array is the aggregate over its
// pools (StatType::AGGREGATE, named so in 1.13 and 2.x alike but in other namespaces since 2.5).
void reset_peak_memory(torch::Device device) {
  if (!device.is_cuda()) {
    host_meter().reset();
    host_meter().emplace();
    return;
  }
#if TESSERA_TORCH_CUDA
  c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
#else
  no_cuda("peak memory");
#endif
}

int64_t peak_memory_bytes(torch::Device device) {
  if (!device.is_cuda()) return host_meter() ? host_meter()->peak_increase() : 0;
#if TESSERA_TORCH_CUDA
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
  return stats.allocated_bytes[0].peak;
#else
  no_cuda("peak memory");
#endif
}

std::string device_name(torch::Device device) {
  if (!device.is_cuda()) return "cpu";
#if TESSERA_TORCH_CUDA
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device.index() < 0 ? 0 : device.index()) != cudaSuccess) return "cuda";
  return prop.name;
#else
  no_cuda("device name");
#endif
}

// Dense peaks from the vendors' data sheets, TFLOP/s: fp32 on CUDA cores (TF32 off),
// bf16 on tensor cores without sparsity. Matched on the product name, most specific first.
double device_peak_tflops(const GpuCheckOptions& o, torch::Device device, const std::string& precision) {
  const double given = precision == "bf16" ? o.peak_tflops_bf16 : o.peak_tflops_fp32;
  if (given > 0 || !device.is_cuda()) return given;
  struct Peak {
    const char* name;
    double fp32, bf16;
  };
  static const Peak kPeaks[] = {{"H200", 66.9, 989.4}, {"H100 PCIe", 51.2, 756.0}, {"H100 NVL", 60.0, 835.0},
                                {"H100", 66.9, 989.4}, {"A100", 19.5, 312.0},      {"V100", 15.7, 0.0}};
  const std::string name = device_name(device);
  for (const Peak& p : kPeaks)
    if (name.find(p.name) != std::string::npos) return precision == "bf16" ? p.bf16 : p.fp32;
  return 0;
}

double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor x = a.detach().to(torch::kCPU, torch::kDouble), y = b.detach().to(torch::kCPU, torch::kDouble);
  const double scale = y.abs().max().item<double>();
  const double diff = (x - y).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

}  // namespace tessera::gpu_check
