#pragma once
// Per-rank device telemetry for a run: a background thread samples this rank's device every
// `period` and appends one JSON line to RUN/telemetry/rank-N.jsonl (DESIGN.md, "Files a run
// leaves"): time (Unix seconds), rank, host, device, mem_used_bytes, mem_total_bytes,
// util_pct, phase, step, tiles_done, plus temperature_c and power_w when NVML has them, and
// on pipeline ranks the stage's last step: pipeline_stage, stage_step_s, stage_compute_s,
// stage_bytes_sent, stage_bytes_received, stage_peak_bytes (the process's peak resident set).
// GPU figures come from NVML, loaded at run time with dlopen("libnvidia-ml.so.1") — never
// linked, so CPU machines start; without NVML (or without a GPU) the device is "cpu" and the
// figures are this process's RSS, the host's memory and the host's CPU utilisation from /proc.
// No LibTorch. set_phase/set_step/set_tiles_done are thread safe (atomics); the destructor
// writes a last sample and joins the thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace tessera::parallel {

struct DeviceMonitorOptions {
  std::string run_dir;                             ///< required: writes run_dir/telemetry/rank-N.jsonl
  int rank = 0;
  int device = -1;                                 ///< CUDA device index (NVML), -1 = CPU
  std::chrono::milliseconds period{1000};

  /// Throws tessera::Error naming the bad field.
  void validate() const;
};

/// A pipeline stage's last training step, for the telemetry lines (set_pipeline_stage).
struct PipelineStageSample {
  int stage = -1;  ///< -1: not a pipeline rank (no stage fields written)
  double step_seconds = 0, compute_seconds = 0;
  int64_t bytes_sent = 0, bytes_received = 0, peak_bytes = 0;
};

struct DeviceSummary {
  int64_t samples = 0;
  int64_t peak_mem_used_bytes = 0;
  double mean_util_pct = 0;
  std::string device;
};

class DeviceMonitor {
 public:
  explicit DeviceMonitor(DeviceMonitorOptions options);
  ~DeviceMonitor();
  DeviceMonitor(const DeviceMonitor&) = delete;
  DeviceMonitor& operator=(const DeviceMonitor&) = delete;

  void set_phase(const std::string& phase);  ///< e.g. "train", "infer", "assemble", "done"
  void set_step(int64_t step) { step_ = step; }
  void set_tiles_done(int64_t tiles) { tiles_ = tiles; }
  void set_pipeline_stage(const PipelineStageSample& s);
  /// Writes a sample now (also done every period and at destruction).
  void sample_now();
  /// Peak memory and mean utilisation over the samples so far.
  DeviceSummary summary() const;
  const std::string& path() const { return path_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  std::atomic<int64_t> step_{0}, tiles_{0};
};

}  // namespace tessera::parallel
