#include "tessera/parallel/device_monitor.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"
#include "tessera/core/run_layout.hpp"

namespace tessera::parallel {
namespace {

// The few NVML entry points we use, declared here so nothing links against NVML.
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned int gpu, memory;
};
using NvmlDevice = void*;

class Nvml {
 public:
  explicit Nvml(int index) {
    if (index < 0) return;
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return;
    init_ = sym<int (*)()>("nvmlInit_v2");
    shutdown_ = sym<int (*)()>("nvmlShutdown");
    handle_ = sym<int (*)(unsigned, NvmlDevice*)>("nvmlDeviceGetHandleByIndex_v2");
    memory_ = sym<int (*)(NvmlDevice, NvmlMemory*)>("nvmlDeviceGetMemoryInfo");
    util_ = sym<int (*)(NvmlDevice, NvmlUtilization*)>("nvmlDeviceGetUtilizationRates");
    temp_ = sym<int (*)(NvmlDevice, int, unsigned*)>("nvmlDeviceGetTemperature");
    power_ = sym<int (*)(NvmlDevice, unsigned*)>("nvmlDeviceGetPowerUsage");
    if (init_ && shutdown_ && handle_ && memory_ && util_ && init_() == 0) {
      initialised_ = true;
      ok_ = handle_(unsigned(index), &device_) == 0;
    }
  }
  ~Nvml() {
    if (initialised_) shutdown_();
    if (lib_) dlclose(lib_);
  }
  bool ok() const { return ok_; }
  void sample(nlohmann::json& j) const {
    NvmlMemory m{};
    NvmlUtilization u{};
    if (memory_(device_, &m) == 0) {
      j["mem_used_bytes"] = int64_t(m.used);
      j["mem_total_bytes"] = int64_t(m.total);
    }
    if (util_(device_, &u) == 0) j["util_pct"] = double(u.gpu);
    unsigned v = 0;
    if (temp_ && temp_(device_, 0, &v) == 0) j["temperature_c"] = v;
    if (power_ && power_(device_, &v) == 0) j["power_w"] = v / 1000.0;
  }

 private:
  template <class F>
  F sym(const char* name) {
    return reinterpret_cast<F>(dlsym(lib_, name));
  }
  void* lib_ = nullptr;
  bool initialised_ = false, ok_ = false;
  NvmlDevice device_ = nullptr;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*handle_)(unsigned, NvmlDevice*) = nullptr;
  int (*memory_)(NvmlDevice, NvmlMemory*) = nullptr;
  int (*util_)(NvmlDevice, NvmlUtilization*) = nullptr;
  int (*temp_)(NvmlDevice, int, unsigned*) = nullptr;
  int (*power_)(NvmlDevice, unsigned*) = nullptr;
};

int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

int64_t host_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  while (f >> key >> kb) {
    if (key == "MemTotal:") return kb * 1024;
    f.ignore(256, '\n');
  }
  return 0;
}

// Host CPU utilisation between two reads of /proc/stat's "cpu" line.
class CpuLoad {
 public:
  double sample() {
    std::ifstream f("/proc/stat");
    std::string cpu;
    int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    const int64_t busy = user + nice + system + irq + softirq + steal, all = busy + idle + iowait;
    const double pct = all > all_ ? 100.0 * double(busy - busy_) / double(all - all_) : 0.0;
    busy_ = busy;
    all_ = all;
    return pct;
  }

 private:
  int64_t busy_ = 0, all_ = 0;
};

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

void DeviceMonitorOptions::validate() const {
  if (run_dir.empty()) throw Error("telemetry: run_dir required");
  if (rank < 0) throw Error("telemetry: rank must be >= 0");
  if (period.count() < 10) throw Error("telemetry: period must be >= 10 ms");
}

struct DeviceMonitor::Impl {
  DeviceMonitorOptions options;
  std::ofstream out;
  std::string host, device;
  Nvml nvml;
  CpuLoad cpu;
  int64_t total_memory = host_memory_bytes();
  mutable std::mutex mutex;  // guards everything below and the file
  std::condition_variable wake;
  bool stop = false;
  std::string phase = "start";
  PipelineStageSample stage;
  DeviceSummary summary;
  double util_sum = 0;
  std::thread thread;

  explicit Impl(DeviceMonitorOptions o) : options(std::move(o)), host(host_name()), nvml(options.device) {
    device = nvml.ok() ? "cuda:" + std::to_string(options.device) : "cpu";
    summary.device = device;
    cpu.sample();
  }
};

DeviceMonitor::DeviceMonitor(DeviceMonitorOptions options) {
  options.validate();
  const RunLayout run(options.run_dir);
  std::filesystem::create_directories(run.telemetry_dir());
  path_ = run.telemetry(options.rank);
  impl_ = std::make_unique<Impl>(std::move(options));
  impl_->out.open(path_, std::ios::app);
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
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json j{{"time", now},
                   {"rank", impl_->options.rank},
                   {"host", impl_->host},
                   {"device", impl_->device},
                   {"mem_used_bytes", rss_bytes()},
                   {"mem_total_bytes", impl_->total_memory},
                   {"util_pct", impl_->cpu.sample()},
                   {"phase", impl_->phase},
                   {"step", step_.load()},
                   {"tiles_done", tiles_.load()}};
  if (impl_->nvml.ok()) impl_->nvml.sample(j);
  if (const PipelineStageSample& p = impl_->stage; p.stage >= 0) {
    j["pipeline_stage"] = p.stage;
    j["stage_step_s"] = p.step_seconds;
    j["stage_compute_s"] = p.compute_seconds;
    j["stage_bytes_sent"] = p.bytes_sent;
    j["stage_bytes_received"] = p.bytes_received;
    j["stage_peak_bytes"] = p.peak_bytes;
  }
  impl_->out << j.dump() << '\n';
  impl_->out.flush();
  DeviceSummary& s = impl_->summary;
  ++s.samples;
  s.peak_mem_used_bytes = std::max<int64_t>(s.peak_mem_used_bytes, j["mem_used_bytes"].get<int64_t>());
  impl_->util_sum += j["util_pct"].get<double>();
  s.mean_util_pct = impl_->util_sum / double(s.samples);
}

DeviceSummary DeviceMonitor::summary() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->summary;
}

}  // namespace tessera::parallel
