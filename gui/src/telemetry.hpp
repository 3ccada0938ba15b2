#pragma once
// Reading a run's per-rank telemetry: RUN/telemetry/rank-<N>.jsonl, one line per sample in
// the codec of tessera/run/telemetry.hpp (the writer's, parallel::DeviceMonitor). Lines that do
// not decode (a half-written last line, garbage) are skipped and counted, never fatal. Also
// samples this machine (its GPUs through NVML, or its host CPU and RAM from /proc) through the
// shared tessera::DeviceProbe. Pure I/O, no widgets; safe to call from a worker thread.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/run/telemetry.hpp"

namespace tessera::gui {

using TelemetrySample = tessera::TelemetrySample;

struct RankTelemetry {
  int rank = -1;
  std::string file;
  std::vector<TelemetrySample> history;  ///< oldest first, at most `history` samples
  int broken_lines = 0;
  std::string first_problem;  ///< why the first broken line was skipped
};

struct TelemetrySnapshot {
  std::vector<RankTelemetry> ranks;  ///< sorted by rank
  int broken_lines = 0;
  std::vector<std::string> problems;  ///< one line per file with broken lines or read errors
};

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
    int64_t lines = 0;  // complete lines read so far
    std::string pending;  // bytes after the last newline
    RankTelemetry rank;
  };
  std::string run_dir_;
  size_t history_;
  std::map<std::string, FileState> files_;
};

/// This machine's host (rank -1, device "cpu", phase "host"): memory in use / total from
/// /proc/meminfo, CPU busy % since the previous call.
TelemetrySample sample_local_host();

/// This machine's GPUs through NVML (loaded once, at first use): name, memory, utilisation,
/// temperature, power. Empty when NVML or a GPU is absent; `note` then says why (e.g. "NVML
/// not found (no NVIDIA driver): host CPU/RAM shown").
std::vector<TelemetrySample> sample_local_gpus(std::string* note = nullptr);

}  // namespace tessera::gui
