#include "tessera/parallel/modes/device_monitor.hpp"

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <torch/cuda.h>

#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/run/device_probe.hpp"
#include "tessera/run/process_memory.hpp"
#include "tessera/run/run_layout.hpp"

namespace tessera::parallel {

DeviceMonitorOptions DeviceMonitorOptions::for_this_rank(std::string run_dir) {
  DeviceMonitorOptions o;
  o.run_dir = std::move(run_dir);
  o.rank = world().rank();
  o.device = select_device(launch_info(), torch::cuda::is_available() ? int(torch::cuda::device_count()) : 0);
  return o;
}

void DeviceMonitorOptions::validate() const {
  if (run_dir.empty()) throw Error("telemetry: run_dir required");
  if (rank < 0) throw Error("telemetry: rank must be >= 0");
  if (period.count() < 10) throw Error("telemetry: period must be >= 10 ms");
}

struct DeviceMonitor::Impl {
  DeviceMonitorOptions options;
  std::ofstream out;
  std::string host = host_name();
  DeviceProbe probe;
  bool gpu = false;  // options.device is a GPU that NVML reads; otherwise the host is sampled
  mutable std::mutex mutex;  // guards everything below and the file
  std::condition_variable wake;
  bool stop = false;
  std::string phase = "start";
  PipelineStageSample stage;
  DeviceSummary summary;
  double util_sum = 0;
  double last_cpu_seconds = -1, last_time = 0;  // the previous sample's, for process_cpu_pct
  std::thread thread;

  explicit Impl(DeviceMonitorOptions o) : options(std::move(o)), probe(/*use_gpus=*/options.device >= 0) {
    gpu = probe.read_gpu(options.device).has_value();
    summary.device = gpu ? "cuda:" + std::to_string(options.device) : "cpu";
  }

  // This rank's device now; a GPU that stops answering NVML is read as the host.
  void read_device(TelemetrySample& s) {
    std::optional<DeviceReading> r = gpu ? probe.read_gpu(options.device) : std::nullopt;
    if (!r) r = probe.read_host();
    s.mem_used_bytes = r->mem_used_bytes;
    s.mem_total_bytes = r->mem_total_bytes;
    s.util_pct = r->util_pct;
    s.temperature_c = r->temperature_c;
    s.power_w = r->power_w;
  }

  // This process's CPU use since the previous sample (none before the first).
  void read_process_cpu(TelemetrySample& s) {
    const double cpu = process_cpu_seconds();
    if (last_cpu_seconds >= 0 && s.time > last_time)
      s.process_cpu_pct = std::max(0.0, 100.0 * (cpu - last_cpu_seconds) / (s.time - last_time));
    last_cpu_seconds = cpu;
    last_time = s.time;
  }

  void add_to_summary(const TelemetrySample& s) {
    ++summary.samples;
    summary.peak_mem_used_bytes = std::max(summary.peak_mem_used_bytes, s.mem_used_bytes);
    summary.peak_process_rss_bytes = std::max(summary.peak_process_rss_bytes, s.process_rss_bytes);
    util_sum += s.util_pct;
    summary.mean_util_pct = util_sum / double(summary.samples);
  }
};

DeviceMonitor::DeviceMonitor(DeviceMonitorOptions options) {
  options.validate();
  const RunLayout run(options.run_dir);
  std::filesystem::create_directories(run.telemetry_dir());
  path_ = run.telemetry(options.rank);
  impl_ = std::make_unique<Impl>(std::move(options));
  impl_->out.open(path_, std::ios::app);  // appended line by line, read live: not staged
  if (!impl_->out) throw Error(path_ + ": cannot open for writing");
  sample_now();
  impl_->thread = std::thread([this] {
    std::unique_lock lock(impl_->mutex);
    while (!impl_->stop) {
      if (impl_->wake.wait_for(lock, impl_->options.period, [this] { return impl_->stop; })) break;
      lock.unlock();
      sample_now();
      lock.lock();
    }
  });
}

DeviceMonitor::~DeviceMonitor() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  try {
    set_phase("done");
    sample_now();
  } catch (...) {
  }
}

void DeviceMonitor::set_pipeline_stage(const PipelineStageSample& s) {
  std::lock_guard lock(impl_->mutex);
  impl_->stage = s;
}

void DeviceMonitor::set_phase(const std::string& phase) {
  std::lock_guard lock(impl_->mutex);
  impl_->phase = phase;
}

void DeviceMonitor::sample_now() {
  std::lock_guard lock(impl_->mutex);
  TelemetrySample s;
  s.time = telemetry_time_now();
  s.rank = impl_->options.rank;
  s.host = impl_->host;
  s.device = impl_->summary.device;
  s.phase = impl_->phase;
  impl_->read_device(s);
  s.process_rss_bytes = resident_bytes();
  impl_->read_process_cpu(s);
  s.step = step_.load();
  s.tiles_done = tiles_.load();
  s.stage = impl_->stage;
  impl_->out << encode_telemetry_line(s) << '\n';
  impl_->out.flush();
  impl_->add_to_summary(s);
}

DeviceSummary DeviceMonitor::summary() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->summary;
}

}  // namespace tessera::parallel
