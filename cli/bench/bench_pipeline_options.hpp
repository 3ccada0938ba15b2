#pragma once
// What `tessera bench pipeline` is asked, declared once: fields() drives the command's flags
// (`activation_checkpoint` → --activation-checkpoint; --no-memory and --no-time turn off the
// tables that default to on), their help and shown defaults; validate()'s messages name the
// flags. The network is not a field: the command resolves it from --model and the model flags
// (cli/model_options.hpp). The bench itself: bench_pipeline.cpp, bench_pipeline_cap.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/unet_spec.hpp"

namespace tessera::bench {

struct BenchPipelineOptions {
  UNetOptions model = unet_preset("unet-tiny");  ///< not a flag of its own: --model PRESET and the model flags
  std::string model_preset = "unet-tiny";        ///< its preset name, for the calibration and the report
  int64_t tile = 64;        ///< input tile side, raised to the next side the model accepts
  int batch = 8;            ///< samples per step
  std::vector<int> micro;   ///< micro-batch counts M to time; empty: 1, 2, 4, 8 up to batch
  std::string schedule = "1f1b";
  std::string activation_checkpoint = "never";
  std::string balance = "memory";  ///< of the timed runs
  int steps = 5;            ///< timed steps per M, after one warm-up
  int threads = 1;          ///< per rank; 0: automatic
  bool memory = true;       ///< the per-stage memory table
  bool time = true;         ///< the timed runs
  std::string calibration;  ///< "": ~/.cache/tessera/calibration.json if it has the model
  double memory_cap = 0;    ///< MiB per rank for the largest-side search; 0: no search
  int64_t max_side = 4096;  ///< the largest side that search tries

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(BenchPipelineOptions& o, V& v) {
  v.field("tile", o.tile, "Input tile side (raised to the next side the model accepts)");
  v.field("batch", o.batch, "Samples per step (the mini-batch)");
  v.field("micro", o.micro, "Micro-batch counts M to time (default 1,2,4,8 up to --batch)");
  v.field("schedule", o.schedule, "gpipe or 1f1b");
  v.field("activation_checkpoint", o.activation_checkpoint, "Activation checkpointing: never, always or except_last");
  v.field("balance", o.balance,
          "naive, memory or time (measured layer times when calibrated, else the FLOP model), for the timed runs");
  v.field("steps", o.steps, "Timed steps per M (after one warm-up)");
  v.field("threads", o.threads, "LibTorch threads per rank (0: automatic)");
  v.field("memory", o.memory, "The per-stage memory table (--no-memory: skip it)");
  v.field("time", o.time, "The timed runs, the bubble table (--no-time: skip them)");
  v.field("calibration", o.calibration,
          "Calibration file with the model's layer memory (default ~/.cache/tessera/calibration.json if it has one)");
  v.field("memory_cap", o.memory_cap,
          "MiB per rank: find the largest trainable input side for 1 rank, K ranks naive and K ranks planned (0: no "
          "search)");
  v.field("max_side", o.max_side, "Largest input side --memory-cap tries");
}

/// Pipeline-parallel training of `model` over all ranks (one stage per rank; run under
/// mpirun): step time and bubble per M, stage memory of the naive and the memory-aware
/// balance, and with memory_cap the largest trainable side; rank 0 prints the tables and the
/// report as one JSON line. Collective; throws tessera::Error.
void run_bench_pipeline(const BenchPipelineOptions& o);

}  // namespace tessera::bench
