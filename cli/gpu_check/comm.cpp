// Step 4: the NCCL communicator's collectives with one rank (bootstrapped by the one-rank
// group: no MPI on the GPU machine), and NVML telemetry read while the other steps run.
#include <algorithm>
#include <chrono>
#include <optional>

#include <torch/torch.h>

#include "gpu_check.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/run/device_probe.hpp"

namespace tessera::gpu_check {
namespace {

// Each collective of one rank must give back its input (sum, average, max of one value).
nlohmann::json collectives(parallel::Communicator& nccl, torch::Device device) {
  torch::manual_seed(10);
  const torch::Tensor x = torch::randn({1 << 20}, torch::TensorOptions().device(device));
  nlohmann::json j;
  auto record = [&](const char* name, const torch::Tensor& got, const torch::Tensor& want) {
    j[name] = got.sizes() == want.sizes() && torch::equal(got.cpu(), want.cpu());
  };
  torch::Tensor t = x.clone();
  nccl.allreduce(t, parallel::ReduceOp::kSum);
  record("allreduce_sum", t, x);
  t = x.clone();
  nccl.allreduce(t, parallel::ReduceOp::kAverage);
  record("allreduce_average", t, x);
  t = x.clone();
  nccl.broadcast(t, 0);
  record("broadcast", t, x);
  record("allgather", nccl.allgather(x), x.unsqueeze(0));
  record("reduce_scatter", nccl.reduce_scatter(x, parallel::ReduceOp::kSum), x);
  t = x.clone();
  nccl.iallreduce(t, parallel::ReduceOp::kMax)->wait();
  record("iallreduce_max", t, x);
  nccl.barrier();
  bool all = true;
  for (const auto& [name, ok] : j.items()) all = all && ok.get<bool>();
  j["pass"] = all;
  return j;
}

}  // namespace

nlohmann::json check_comm(torch::Device device) {
  nlohmann::json j{{"backends", parallel::compiled_backends()}};
  if (!device.is_cuda()) {
    j["skipped"] = "NCCL needs CUDA tensors (--device cpu)";
    j["pass"] = true;
    return j;
  }
  try {
    const auto self = parallel::make_self_communicator();
    const auto start = std::chrono::steady_clock::now();
    const auto nccl = parallel::make_nccl_communicator(*self, device.index() < 0 ? 0 : device.index());
    j["init_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    j["backend"] = nccl->backend();
    j["collectives"] = collectives(*nccl, device);
    j["pass"] = j["collectives"]["pass"];
  } catch (const std::exception& e) {
    j["error"] = e.what();
    j["pass"] = false;
  }
  return j;
}

TelemetrySampler::TelemetrySampler(torch::Device device) : gpu_(device.is_cuda()) {
  thread_ = std::thread([this] { sample(); });
}

TelemetrySampler::~TelemetrySampler() { stop(); }

void TelemetrySampler::sample() {
  DeviceProbe probe(gpu_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    summary_["nvml_note"] = probe.gpu_note();
    summary_["gpus"] = probe.gpu_count();
  }
  int64_t samples = 0, max_used = 0;
  double max_util = 0, max_power = 0;
  std::string name;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopped_) {
    lock.unlock();
    const std::optional<DeviceReading> r = gpu_ ? probe.read_gpu(0) : std::optional<DeviceReading>(probe.read_host());
    lock.lock();
    if (r) {
      ++samples;
      name = r->name;
      max_used = std::max(max_used, r->mem_used_bytes);
      max_util = std::max(max_util, r->util_pct);
      max_power = std::max(max_power, r->power_w.value_or(0.0));
    }
    wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopped_; });
  }
  summary_["device"] = name;
  summary_["samples"] = samples;
  summary_["max_mem_used_mib"] = double(max_used) / (1 << 20);
  summary_["max_util_pct"] = max_util;
  if (gpu_) summary_["max_power_w"] = max_power;
}

nlohmann::json TelemetrySampler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json j = summary_;
  // On the GPU: NVML read the device while it worked; on the CPU: the host was read.
  j["pass"] = j.value("samples", 0) > 0 && (!gpu_ || j.value("max_mem_used_mib", 0.0) > 0);
  return j;
}

}  // namespace tessera::gpu_check
