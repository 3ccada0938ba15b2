#pragma once
// What `tessera bench pipeline` (bench_pipeline.cpp) shares with its --memory-cap search
// (bench_pipeline_cap.cpp) and bench spatial: the model set-up (bench_pipeline_stage.cpp), the
// balances it compares and the measurement of one stage's training memory. Internal to the
// benches.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/types.h>

#include "bench_pipeline_options.hpp"
#include "tessera/engine/calibration.hpp"
#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/parallel/modes/pipeline.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"
#include "tessera/parallel/comm/process_grid.hpp"

namespace tessera::bench::pipeline_bench {

struct Setup {
  UNetOptions options;
  int64_t side = 0;
  LayerSequence seq;
  PipelineScheduleKind schedule;
  parallel::LayerMemoryCalibration calibration;  // empty: the stage model alone
  ActivationCheckpoint checkpoint = ActivationCheckpoint::kNever;
  parallel::LayerTimeCalibration times;  // measured layer times for --balance time (empty: FLOP model)

  parallel::PipelineOptions pipeline_options(std::vector<int> balance, int m) const {
    return parallel::PipelineOptions(std::move(balance)).with_micro_batches(m).with_schedule(schedule).with_checkpoint(checkpoint);
  }
};

/// The run's model, side (the smallest valid input side >= --tile), layer sequence and
/// calibration: `cal` and `cal_path` are the calibration read (refused when --calibration
/// names a file without this model's memory calibration, or a stale one).
Setup make_setup(const BenchPipelineOptions& f, engine::ModelCalibration& cal, std::filesystem::path& cal_path);

struct Batch {
  torch::Tensor input, target;
};

/// The stage memory model for `seq` at M = `m` (with the calibrated extras when asked and present).
StageMemoryOptions memory_options(const Setup& s, const LayerSequence& seq, int m, bool calibrated);

/// The partition `strategy` (naive, memory, time) gives for K = `k` stages at M = `m`.
parallel::Partition partition_for(const Setup& s, const LayerSequence& seq, const std::string& strategy, int k, int m);

/// `batch` random tiles of input side `side` and their random labels.
Batch make_batch(const UNetOptions& o, int batch, int64_t side);

struct StagePeak {
  int64_t total = 0;     // state + step: what the planner's stage_bytes predicts
  int64_t state = 0;     // parameters, gradients, Adam's moments (from the tensors)
  int64_t step = 0;      // peak resident increase during a steady step (second step, Adam update included)
  int64_t one_time = 0;  // resident growth of the first step beyond the state (kernel caches, MPI buffers, heap)
};

// This rank's stage in training: built, one step and Adam update (gradients and moments
// allocated, kernels set up), then the measured steady step.
StagePeak measure_stage_peak(const UNetImpl& net, int64_t side, parallel::Communicator& pipeline,
                             parallel::Communicator& data, const parallel::PipelineOptions& po, const Batch& b);


// ---- --memory-cap (bench_pipeline_cap.cpp) ----

enum class CapConfig { kOneRank, kNaive, kMemory };

struct CapRow {
  std::string name;
  int ranks = 1;
  int64_t side = 0, peak = 0;            // largest side within the cap (0: none) and its peak
  int64_t over_side = 0, over_peak = 0;  // the smallest side measured over the cap (0: none up to --max-side)
  int64_t predicted_side = 0;            // the planner's largest side within the cap
  std::vector<int> balance;
  int probes = 0;
};

/// The largest input side whose training step stays within `cap` bytes per rank for `config`
/// (every rank calls; kOneRank trains the whole network on `self`).
CapRow largest_side(const BenchPipelineOptions& f, const Setup& s, parallel::ProcessGrid& grid, parallel::Communicator& self,
                    const UNetImpl& net, CapConfig config, int64_t cap);

}  // namespace tessera::bench::pipeline_bench
