#pragma once
// What `tessera bench simulate` is asked, declared once: fields() drives the command's flags
// (`pipeline_steps` → --pipeline-steps), their help and shown defaults; validate()'s messages
// name the flags. The bench itself: bench_simulate.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace tessera::bench {

struct BenchSimulateOptions {
  std::string model = "unet-tiny";  ///< model preset
  int64_t tile = 48;                ///< training inset S; the network input is S + remainder + 2 halo
  int batch = 8;                    ///< global batch: a multiple of the bench's 2 ranks
  std::vector<int> micro{1, 2, 4, 8};  ///< pipeline micro-batch counts M, each dividing `batch`
  int pipeline_steps = 5;           ///< timed pipeline steps per M
  int train_steps = 16;             ///< per training run; the first is not timed
  int repeats = 3;                  ///< training runs; the median of their medians is compared
  std::string cluster = source_file("clusters/this-machine.yaml");
  std::string work_dir = default_work_dir();
  std::string mpirun = "mpirun";

  /// Throws tessera::Error naming the flag.
  void validate() const;
};

template <class V>
void fields(BenchSimulateOptions& o, V& v) {
  v.field("model", o.model, "Model preset");
  v.field("tile", o.tile, "Training tile inset S (the network input is S + remainder + 2 halo)");
  v.field("batch", o.batch, "Global batch (tiles per step)");
  v.field("micro", o.micro, "Pipeline micro-batch counts M");
  v.field("pipeline_steps", o.pipeline_steps, "Timed pipeline steps per M");
  v.field("train_steps", o.train_steps, "Training steps per run (the first is not timed)");
  v.field("repeats", o.repeats, "Training runs; the median of their medians is compared");
  v.field("cluster", o.cluster, "Cluster description of this machine");
  v.field("work_dir", o.work_dir, "Where the calibration, scene and runs go");
  v.field("mpirun", o.mpirun, "MPI launcher");
}

/// The cluster simulator's step times against this machine's (a calibration, bench pipeline
/// and `tessera train` under mpirun on 2 ranks): a table on stdout, then the report as one
/// JSON line. Throws tessera::Error.
void run_bench_simulate(const BenchSimulateOptions& o);

}  // namespace tessera::bench
