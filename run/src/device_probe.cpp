#include "tessera/run/device_probe.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

namespace tessera {

// The few NVML entry points we use, declared by ABI so no NVML header or library is needed at
// build time (nvml.h: nvmlReturn_t is an int enum, 0 = success; nvmlDevice_t a pointer).
struct DeviceProbe::Nvml {
  struct Memory {
    unsigned long long total, free, used;
  };
  struct Utilization {
    unsigned int gpu, memory;
  };
  using Device = void*;

  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned int*) = nullptr;
  int (*handle)(unsigned int, Device*) = nullptr;
  int (*name)(Device, char*, unsigned int) = nullptr;
  int (*memory)(Device, Memory*) = nullptr;
  int (*utilization)(Device, Utilization*) = nullptr;
  int (*temperature)(Device, int, unsigned int*) = nullptr;
  int (*power)(Device, unsigned int*) = nullptr;
  bool initialised = false;

  // Loads and initialises NVML; on failure says why in `note` and stays unusable.
  explicit Nvml(std::string& note) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      note = "NVML not found (no NVIDIA driver)";
      return;
    }
    sym(init, "nvmlInit_v2");
    sym(shutdown, "nvmlShutdown");
    sym(count, "nvmlDeviceGetCount_v2");
    sym(handle, "nvmlDeviceGetHandleByIndex_v2");
    sym(name, "nvmlDeviceGetName");
    sym(memory, "nvmlDeviceGetMemoryInfo");
    sym(utilization, "nvmlDeviceGetUtilizationRates");
    sym(temperature, "nvmlDeviceGetTemperature");
    sym(power, "nvmlDeviceGetPowerUsage");
    if (!init || !shutdown || !count || !handle || !memory)
      note = "NVML is incomplete";
    else if (init() != 0)
      note = "NVML failed to initialise";
    else
      initialised = true;
  }
  ~Nvml() {
    if (initialised) shutdown();
    if (lib) dlclose(lib);
  }

  template <class F>
  void sym(F& fn, const char* symbol) {
    fn = reinterpret_cast<F>(dlsym(lib, symbol));
  }
};

// /proc/stat's "cpu" line at the previous read.
struct DeviceProbe::CpuTicks {
  std::mutex mutex;
  int64_t busy = 0, all = 0;
};

namespace {

// Busy and total ticks of all CPUs since boot (/proc/stat's first line; guest time is already
// inside user and nice).
std::pair<int64_t, int64_t> cpu_ticks() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  const int64_t busy = user + nice + system + irq + softirq + steal;
  return {busy, busy + idle + iowait};
}

// MemTotal and MemAvailable of /proc/meminfo, bytes.
std::pair<int64_t, int64_t> host_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  int64_t kb = 0, total = 0, available = 0;
  while (f >> key >> kb) {
    if (key == "MemTotal:") total = kb * 1024;
    if (key == "MemAvailable:") available = kb * 1024;
    std::getline(f, unit);  // " kB"
  }
  return {total, available};
}

}  // namespace

DeviceProbe::DeviceProbe(bool use_gpus) : cpu_(std::make_unique<CpuTicks>()) {
  if (use_gpus) {
    auto nvml = std::make_unique<Nvml>(gpu_note_);
    if (nvml->initialised) nvml_ = std::move(nvml);
  } else {
    gpu_note_ = "GPUs not probed (CPU device)";
  }
  std::tie(cpu_->busy, cpu_->all) = cpu_ticks();
}

DeviceProbe::~DeviceProbe() = default;

int DeviceProbe::gpu_count() const {
  unsigned int n = 0;
  if (!nvml_ || nvml_->count(&n) != 0) return 0;
  return int(n);
}

std::optional<DeviceReading> DeviceProbe::read_gpu(int index) const {
  Nvml::Device d = nullptr;
  if (!nvml_ || index < 0 || nvml_->handle(unsigned(index), &d) != 0) return std::nullopt;
  Nvml::Memory m{};
  if (nvml_->memory(d, &m) != 0) return std::nullopt;
  DeviceReading r;
  char name[96] = {};
  r.name = (nvml_->name && nvml_->name(d, name, sizeof name) == 0) ? std::string(name) : "gpu " + std::to_string(index);
  r.mem_used_bytes = int64_t(m.used);
  r.mem_total_bytes = int64_t(m.total);
  Nvml::Utilization u{};
  if (nvml_->utilization && nvml_->utilization(d, &u) == 0) r.util_pct = double(u.gpu);
  unsigned int celsius = 0, milliwatts = 0;
  if (nvml_->temperature && nvml_->temperature(d, /*NVML_TEMPERATURE_GPU*/ 0, &celsius) == 0) r.temperature_c = celsius;
  if (nvml_->power && nvml_->power(d, &milliwatts) == 0) r.power_w = milliwatts / 1000.0;
  return r;
}

DeviceReading DeviceProbe::read_host() {
  DeviceReading r;
  r.name = "cpu";
  const auto [total, available] = host_memory();
  r.mem_total_bytes = total;
  r.mem_used_bytes = total - available;
  const auto [busy, all] = cpu_ticks();
  std::lock_guard lock(cpu_->mutex);
  if (all > cpu_->all) r.util_pct = 100.0 * double(busy - cpu_->busy) / double(all - cpu_->all);
  cpu_->busy = busy;
  cpu_->all = all;
  return r;
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace tessera
