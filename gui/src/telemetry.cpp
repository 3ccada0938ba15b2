#include "telemetry.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <QDateTime>
#include <QString>
#include <nlohmann/json.hpp>

#include "tessera/core/run_layout.hpp"

namespace tessera::gui {
namespace fs = std::filesystem;

std::optional<TelemetrySample> parse_telemetry_line(const std::string& line) {
  const auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("rank") || !json.contains("time")) return std::nullopt;
  try {
    TelemetrySample s;
    const auto& t = json.at("time");
    if (t.is_number()) {
      s.time = t.get<double>();
    } else if (t.is_string()) {
      const QDateTime d = QDateTime::fromString(QString::fromStdString(t.get<std::string>()), Qt::ISODateWithMs);
      if (!d.isValid()) return std::nullopt;
      s.time = double(d.toMSecsSinceEpoch()) / 1000.0;
    } else {
      return std::nullopt;
    }
    s.rank = json.at("rank").get<int>();
    s.host = json.value("host", "");
    s.device = json.value("device", "");
    s.phase = json.value("phase", "");
    s.mem_used = json.value("mem_used_bytes", 0.0);
    s.mem_total = json.value("mem_total_bytes", 0.0);
    s.util_pct = json.value("util_pct", 0.0);
    s.temperature_c = json.value("temperature_c", -1.0);
    s.power_w = json.value("power_w", -1.0);
    s.step = json.value("step", 0ll);
    s.tiles_done = json.value("tiles_done", 0ll);
    s.pipeline_stage = json.value("pipeline_stage", -1);
    s.stage_step_s = json.value("stage_step_s", 0.0);
    return s;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a field of the wrong type
  }
}

TelemetrySnapshot TelemetryReader::poll() {
  TelemetrySnapshot snap;
  fs::path dir = RunLayout(run_dir_).telemetry_dir();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) dir = run_dir_;
  if (!fs::is_directory(dir, ec)) return snap;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::optional<int> rank = RunLayout::telemetry_rank(entry.path().filename().string());
    if (!rank) continue;
    FileState& f = files_[entry.path().string()];
    f.rank.rank = *rank;
    f.rank.file = entry.path().string();
    const uintmax_t size = fs::file_size(entry.path(), ec);
    if (ec) {
      snap.problems.push_back(f.rank.file + ": cannot be read");
      continue;
    }
    if (size < f.offset) f = FileState{0, {}, RankTelemetry{f.rank.rank, f.rank.file, {}, 0}};  // truncated: start over
    if (size > f.offset) {
      std::ifstream in(entry.path(), std::ios::binary);
      in.seekg(std::streamoff(f.offset));
      std::string chunk(size - f.offset, '\0');
      in.read(chunk.data(), std::streamsize(chunk.size()));
      chunk.resize(size_t(in.gcount()));
      f.offset += chunk.size();
      f.pending += chunk;
      size_t start = 0;
      for (size_t nl; (nl = f.pending.find('\n', start)) != std::string::npos; start = nl + 1) {
        const std::string line = f.pending.substr(start, nl - start);
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        if (auto sample = parse_telemetry_line(line))
          f.rank.history.push_back(std::move(*sample));
        else
          ++f.rank.broken_lines;
      }
      f.pending.erase(0, start);
      auto& h = f.rank.history;
      if (h.size() > history_) h.erase(h.begin(), h.end() - std::ptrdiff_t(history_));
    }
    if (f.rank.broken_lines > 0)
      snap.problems.push_back(f.rank.file + ": " + std::to_string(f.rank.broken_lines) + " broken line(s) skipped");
    snap.broken_lines += f.rank.broken_lines;
    snap.ranks.push_back(f.rank);
  }
  std::sort(snap.ranks.begin(), snap.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return snap;
}

TelemetrySample sample_local_host() {
  TelemetrySample s;
  s.time = double(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
  s.rank = -1;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  s.host = host;
  s.device = "cpu";
  s.phase = "host";
  std::ifstream mem("/proc/meminfo");
  std::string key;
  double value = 0, total = 0, available = 0;
  std::string unit;
  while (mem >> key >> value >> unit) {
    if (key == "MemTotal:") total = value * 1024;
    if (key == "MemAvailable:") available = value * 1024;
  }
  s.mem_total = total;
  s.mem_used = total - available;
  static std::mutex m;
  static unsigned long long last_busy = 0, last_total = 0;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  unsigned long long v[8] = {};
  stat >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7];
  const unsigned long long idle = v[3] + v[4];
  unsigned long long sum = 0;
  for (auto x : v) sum += x;
  std::lock_guard lock(m);
  if (last_total && sum > last_total)
    s.util_pct = 100.0 * double((sum - idle) - last_busy) / double(sum - last_total);
  last_busy = sum - idle;
  last_total = sum;
  return s;
}

namespace {

// The few NVML entry points we use, declared by ABI so no NVML header or library is needed
// at build time (nvml.h: nvmlReturn_t is an int enum, 0 = success; nvmlDevice_t a pointer).
struct Nvml {
  struct Memory {
    unsigned long long total, free, used;
  };
  struct Utilization {
    unsigned int gpu, memory;
  };
  using Device = void*;
  int (*init)() = nullptr;
  int (*count)(unsigned int*) = nullptr;
  int (*handle)(unsigned int, Device*) = nullptr;
  int (*name)(Device, char*, unsigned int) = nullptr;
  int (*memory)(Device, Memory*) = nullptr;
  int (*utilization)(Device, Utilization*) = nullptr;
  int (*temperature)(Device, int, unsigned int*) = nullptr;
  int (*power)(Device, unsigned int*) = nullptr;
  std::string error;

  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = "NVML not found (no NVIDIA driver): host CPU/RAM shown";
      return;
    }
    auto sym = [&](auto& fn, const char* n) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, n)); };
    sym(init, "nvmlInit_v2");
    sym(count, "nvmlDeviceGetCount_v2");
    sym(handle, "nvmlDeviceGetHandleByIndex_v2");
    sym(name, "nvmlDeviceGetName");
    sym(memory, "nvmlDeviceGetMemoryInfo");
    sym(utilization, "nvmlDeviceGetUtilizationRates");
    sym(temperature, "nvmlDeviceGetTemperature");
    sym(power, "nvmlDeviceGetPowerUsage");
    if (!init || !count || !handle || !memory) {
      error = "NVML is incomplete: host CPU/RAM shown";
      init = nullptr;
    } else if (init() != 0) {
      error = "NVML failed to initialise: host CPU/RAM shown";
      init = nullptr;
    }
  }
};

}  // namespace

std::vector<TelemetrySample> sample_local_gpus(std::string* note) {
  static Nvml nvml;  // loaded once, kept for the process
  std::vector<TelemetrySample> out;
  if (!nvml.init) {
    if (note) *note = nvml.error;
    return out;
  }
  unsigned int n = 0;
  if (nvml.count(&n) != 0) n = 0;
  const TelemetrySample host = sample_local_host();
  for (unsigned int i = 0; i < n; ++i) {
    Nvml::Device d = nullptr;
    if (nvml.handle(i, &d) != 0) continue;
    TelemetrySample s;
    s.time = host.time;
    s.host = host.host;
    s.phase = "local";
    char name[96] = {};
    s.device = (nvml.name && nvml.name(d, name, sizeof name) == 0) ? std::string(name) : "gpu " + std::to_string(i);
    Nvml::Memory m{};
    if (nvml.memory(d, &m) == 0) {
      s.mem_used = double(m.used);
      s.mem_total = double(m.total);
    }
    Nvml::Utilization u{};
    if (nvml.utilization && nvml.utilization(d, &u) == 0) s.util_pct = u.gpu;
    unsigned int t = 0, mw = 0;
    if (nvml.temperature && nvml.temperature(d, 0, &t) == 0) s.temperature_c = t;
    if (nvml.power && nvml.power(d, &mw) == 0) s.power_w = mw / 1000.0;
    out.push_back(std::move(s));
  }
  if (out.empty() && note) *note = "no GPU visible to NVML: host CPU/RAM shown";
  return out;
}

}  // namespace tessera::gui
