#pragma once
// The telemetry sample and its JSON-line codec: the one definition that the writer
// (parallel::DeviceMonitor, RUN/telemetry/rank-N.jsonl) and the reader (tessera-view's devices
// panel) share. One sample is one line, one JSON object; the field names live only in the
// codec (telemetry.cpp). Torch-free, MPI-free, no I/O; every function is thread safe.
//
// "Memory used" has one meaning everywhere: the memory in use on the sample's device, counted
// as the device counts it — all processes, not just this one. For a GPU that is NVML's "used"
// (device memory allocated by anyone); for the CPU it is the host's memory in use, MemTotal −
// MemAvailable from /proc/meminfo. mem_total_bytes is the same device's capacity, so
// used / total is how full the device is — what runs out first. What the rank's own process
// holds is a separate field, process_rss_bytes, and so is its CPU time, process_cpu_pct: on a
// CPU every rank of a host shares the host figures, so a rank is told apart by these two.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

/// A pipeline stage's last training step (pipeline ranks only).
struct PipelineStageTelemetry {
  int stage = -1;  ///< "pipeline_stage": the stage index; -1: not a pipeline rank (no stage fields written)
  double step_seconds = 0, compute_seconds = 0;  ///< "stage_step_s", "stage_compute_s": wall time of the
                                                 ///< step and the part spent computing, seconds
  int64_t bytes_sent = 0, bytes_received = 0;    ///< "stage_bytes_sent", "stage_bytes_received": activations
                                                 ///< and gradients over the step, bytes
  int64_t peak_bytes = 0;                        ///< "stage_peak_bytes": the process's peak resident set, bytes
};

/// One sample of one rank's device. Keys in the line are the field names unless noted.
struct TelemetrySample {
  double time = 0;           ///< Unix seconds (UTC). Read also from an ISO-8601 string.
  int rank = -1;             ///< MPI rank; -1 for a sample that is not a rank's (the viewer's host)
  std::string host;          ///< host name
  std::string device;        ///< "cuda:N", "cpu", or (local samples) the GPU's product name
  std::string phase;         ///< what the rank does: "start", "train", "infer", "assemble", "done", ...
  int64_t mem_used_bytes = 0;   ///< memory in use on the device, all processes (see the header comment)
  int64_t mem_total_bytes = 0;  ///< the device's memory, bytes
  double util_pct = 0;          ///< device busy, 0..100: GPU utilisation (NVML) or host CPU busy (/proc/stat)
  int64_t process_rss_bytes = 0;  ///< this rank's process: resident set size, bytes (0: not reported)
  /// This rank's process: CPU time (user + system) since its previous sample over the wall time
  /// between them, % of one core (top's convention: 200 = two cores busy). Unset: not reported.
  std::optional<double> process_cpu_pct;
  std::optional<double> temperature_c;  ///< GPU temperature, °C (when NVML reports it)
  std::optional<double> power_w;        ///< GPU power draw, W (when NVML reports it)
  int64_t step = 0;        ///< the last training step started (0 before the first)
  int64_t tiles_done = 0;  ///< inference tiles finished by this rank
  PipelineStageTelemetry stage;  ///< stage.stage < 0: not a pipeline rank
};

/// The sample as one JSON object on one line, without the newline. Optional fields that are
/// unset (temperature, power, stage) are left out.
std::string encode_telemetry_line(const TelemetrySample& sample);

/// The sample of one line. "time" and "rank" are required, every other field may be absent
/// (its default above); unknown keys are ignored. Throws tessera::Error "telemetry line: …"
/// naming the problem (not JSON, not an object, a missing or mistyped field).
TelemetrySample decode_telemetry_line(std::string_view line);

/// Now, in the unit of TelemetrySample::time.
double telemetry_time_now();

}  // namespace tessera
