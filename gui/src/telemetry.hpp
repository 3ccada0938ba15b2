#pragma once
// Reading a run's per-rank telemetry: RUN/telemetry/rank-<N>.jsonl, one JSON object per line
// with time (Unix seconds, or an ISO-8601 string), rank, host, device, mem_used_bytes,
// mem_total_bytes, util_pct, phase, step, tiles_done, and optionally temperature_c, power_w,
// and on pipeline ranks pipeline_stage, stage_step_s. Lines that do not parse (a half-written
// last line, garbage) are skipped and counted, never fatal. Also samples this machine's host
// CPU and RAM from /proc (the fallback when no GPU is visible). Pure I/O, no widgets; safe to
// call from a worker thread.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::gui {

struct TelemetrySample {
  double time = 0;  ///< Unix seconds
  int rank = -1;
  std::string host, device, phase;
  double mem_used = 0, mem_total = 0;  ///< bytes
  double util_pct = 0;
  double temperature_c = -1, power_w = -1;  ///< optional ("temperature_c", "power_w"); < 0 unknown
  long long step = 0, tiles_done = 0;
  int pipeline_stage = -1;  ///< optional ("pipeline_stage"); -1: not a pipeline rank
  double stage_step_s = 0;  ///< optional ("stage_step_s"): the stage's last step, seconds
};

struct RankTelemetry {
  int rank = -1;
  std::string file;
  std::vector<TelemetrySample> history;  ///< oldest first, at most `history` samples
  int broken_lines = 0;
};

struct TelemetrySnapshot {
  std::vector<RankTelemetry> ranks;  ///< sorted by rank
  int broken_lines = 0;
  std::vector<std::string> problems;  ///< one line per file with broken lines or read errors
};

/// Parses one line; nullopt when it is not a telemetry object.
std::optional<TelemetrySample> parse_telemetry_line(const std::string& line);
/// Follows every rank-*.jsonl under run_dir/telemetry (or run_dir itself if it is that
/// folder) incrementally: each poll() reads only the bytes appended since the last one, so a
/// long run with many ranks costs little per refresh. A line is judged once it ends with a
/// newline (a writer may be in the middle of the last one); a file that shrank is re-read.
/// Not thread safe: one poller at a time (the devices panel polls from one worker).
class TelemetryReader {
 public:
  explicit TelemetryReader(std::string run_dir, size_t history = 120)
      : run_dir_(std::move(run_dir)), history_(history) {}
  TelemetrySnapshot poll();

 private:
  struct FileState {
    uintmax_t offset = 0;
    std::string pending;  // bytes after the last newline
    RankTelemetry rank;
  };
  std::string run_dir_;
  size_t history_;
  std::map<std::string, FileState> files_;
};

/// This machine: memory used/total from /proc/meminfo, CPU busy % since the previous call.
TelemetrySample sample_local_host();

/// This machine's GPUs through NVML (libnvidia-ml.so.1 loaded with dlopen at first use):
/// name, memory, utilisation, temperature, power. Empty when NVML or a GPU is absent;
/// `note` then says why (e.g. "NVML not found: host CPU/RAM shown").
std::vector<TelemetrySample> sample_local_gpus(std::string* note = nullptr);

}  // namespace tessera::gui
