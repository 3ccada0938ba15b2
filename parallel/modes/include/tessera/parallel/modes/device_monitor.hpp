#pragma once
// Per-rank device telemetry for a run: a background thread samples this rank's device every
// `period` and appends one line to RUN/telemetry/rank-N.jsonl (DESIGN.md, "Files a run
// leaves"). A line is a tessera::TelemetrySample in its JSON-line codec
// (tessera/run/telemetry.hpp, which defines every field, its unit and what "memory used"
// means); on pipeline ranks it also carries the stage's last step (set_pipeline_stage).
// The device is read through tessera::DeviceProbe: a GPU through NVML, loaded at run time with
// dlopen — never linked, so CPU machines start; without NVML (or without a GPU) the device is
// "cpu" and the figures are the host's memory in use and CPU utilisation from /proc. Every
// line also has this process's resident set (process_rss_bytes).
// No LibTorch. set_phase/set_step/set_tiles_done are thread safe (atomics); the destructor
// writes a last sample and joins the thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "tessera/run/telemetry.hpp"

namespace tessera::parallel {

struct DeviceMonitorOptions {
  std::string run_dir;                             ///< required: writes run_dir/telemetry/rank-N.jsonl
  int rank = 0;
  int device = -1;                                 ///< CUDA device index (NVML), -1 = CPU
  std::chrono::milliseconds period{1000};

  /// Throws tessera::Error naming the bad field.
  void validate() const;
  /// This process's monitor: its rank in parallel::world() and the CUDA device it was given
  /// (select_device over launch_info(); -1 on a host without CUDA), writing into `run_dir`.
  static DeviceMonitorOptions for_this_rank(std::string run_dir);
};

/// A pipeline stage's last training step, for the telemetry lines (set_pipeline_stage).
using PipelineStageSample = PipelineStageTelemetry;

struct DeviceSummary {
  int64_t samples = 0;
  int64_t peak_mem_used_bytes = 0;     ///< peak of mem_used_bytes: the device's memory in use, all processes
  int64_t peak_process_rss_bytes = 0;  ///< peak of this process's resident set
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
