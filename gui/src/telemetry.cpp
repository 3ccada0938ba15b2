#include "telemetry.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tessera/core/error.hpp"
#include "tessera/run/device_probe.hpp"
#include "tessera/run/run_layout.hpp"

namespace tessera::gui {
namespace fs = std::filesystem;
namespace {

// One probe for the viewer's process: NVML is loaded once, the CPU load is measured between
// consecutive refreshes.
DeviceProbe& local_probe() {
  static DeviceProbe probe;
  return probe;
}

// The codec's reason without its "telemetry line: " prefix (the report names the file).
std::string reason(const Error& e) {
  const std::string what = e.what(), prefix = "telemetry line: ";
  return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
}

}  // namespace

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
    if (size < f.offset) f = FileState{0, 0, {}, RankTelemetry{f.rank.rank, f.rank.file, {}, 0, {}}};  // truncated: start over
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
        ++f.lines;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        try {
          f.rank.history.push_back(decode_telemetry_line(line));
        } catch (const Error& e) {
          if (++f.rank.broken_lines == 1) f.rank.first_problem = "line " + std::to_string(f.lines) + ": " + reason(e);
        }
      }
      f.pending.erase(0, start);
      auto& h = f.rank.history;
      if (h.size() > history_) h.erase(h.begin(), h.end() - std::ptrdiff_t(history_));
    }
    if (f.rank.broken_lines > 0)
      snap.problems.push_back(f.rank.file + ": " + std::to_string(f.rank.broken_lines) + " broken line(s) skipped (first: " +
                              f.rank.first_problem + ")");
    snap.broken_lines += f.rank.broken_lines;
    snap.ranks.push_back(f.rank);
  }
  std::sort(snap.ranks.begin(), snap.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return snap;
}

TelemetrySample sample_local_host() {
  const DeviceReading host = local_probe().read_host();
  TelemetrySample s;
  s.time = telemetry_time_now();
  s.rank = -1;
  s.host = host_name();
  s.device = host.name;
  s.phase = "host";
  s.mem_used_bytes = host.mem_used_bytes;
  s.mem_total_bytes = host.mem_total_bytes;
  s.util_pct = host.util_pct;
  return s;
}

std::vector<TelemetrySample> sample_local_gpus(std::string* note) {
  DeviceProbe& probe = local_probe();
  std::vector<TelemetrySample> out;
  const int gpus = probe.gpu_count();
  const double now = telemetry_time_now();
  const std::string host = host_name();
  for (int i = 0; i < gpus; ++i) {
    const std::optional<DeviceReading> gpu = probe.read_gpu(i);
    if (!gpu) continue;
    TelemetrySample s;
    s.time = now;
    s.host = host;
    s.device = gpu->name;
    s.phase = "local";
    s.mem_used_bytes = gpu->mem_used_bytes;
    s.mem_total_bytes = gpu->mem_total_bytes;
    s.util_pct = gpu->util_pct;
    s.temperature_c = gpu->temperature_c;
    s.power_w = gpu->power_w;
    out.push_back(std::move(s));
  }
  if (out.empty() && note)
    *note = (probe.gpu_note().empty() ? std::string("no GPU visible to NVML") : probe.gpu_note()) + ": host CPU/RAM shown";
  return out;
}

}  // namespace tessera::gui
