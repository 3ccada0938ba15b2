// The pieces of `tessera bench pipeline` that its --memory-cap search and bench spatial use
// too: the run's set-up, the stage memory model and balance, a random batch, and one
// stage's measured training memory.
#include <filesystem>

#include <torch/torch.h>

#include "bench_measure.hpp"
#include "bench_pipeline.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera::bench::pipeline_bench {

using namespace ::tessera::engine;  // calibration
namespace fs = std::filesystem;

Setup make_setup(const BenchPipelineOptions& f, ModelCalibration& cal, fs::path& cal_path) {
  Setup s{f.model, f.tile, {}, parse_pipeline_schedule(f.schedule), {},
          parse_activation_checkpoint(f.activation_checkpoint), {}};
  while (!unet_output_size(s.options, s.side)) {  // the smallest valid input side >= --tile
    if (++s.side > 16 * f.tile + 1024) throw Error("--tile: no valid input side for this model near it");
  }
  s.seq = unet_layer_sequence(s.options, s.side);
  cal_path = calibration_path(f.calibration);
  cal = model_calibration(read_calibration(cal_path), cal_path, f.model_preset, s.options);
  s.calibration = cal.memory;
  s.times = cal.time;
  if (!f.calibration.empty() && s.calibration.empty())
    throw Error(!cal.other_options.empty() ? cal.other_options
                                           : cal_path.string() + ": no memory calibration for model '" + f.model_preset +
                                                 "' (run tessera plan --calibrate --model " + f.model_preset + ")");
  if (!s.calibration.empty()) s.calibration.extra_bytes(s.seq);  // a stale calibration fails here, naming it
  return s;
}

StageMemoryOptions memory_options(const Setup& s, const LayerSequence& seq, int m, bool calibrated) {
  auto mo = StageMemoryOptions().with_micro_batches(m).with_schedule(s.schedule).with_checkpoint(s.checkpoint);
  if (calibrated && !s.calibration.empty()) mo.with_extra_bytes(s.calibration.extra_bytes(seq));
  return mo;
}

// `time` balances the layer times `tessera plan --calibrate` measured on this machine (else
// the FLOP model's predicted ones): equal compute per stage, which is what the bubble
// assumes. The memory balance uses the calibrated memory model when there is one.
parallel::Partition partition_for(const Setup& s, const LayerSequence& seq, const std::string& strategy, int k, int m) {
  const auto mo = memory_options(s, seq, m, true);
  const auto kind = parallel::parse_balance_strategy(strategy);
  const parallel::PlanOptions defaults(s.options, {}, 1, 1);
  std::vector<double> seconds;
  if (kind == parallel::BalanceStrategy::kTime)
    seconds = s.times.empty()
                  ? parallel::predicted_layer_seconds(seq, defaults.device_flops, defaults.memory_bytes_per_second, true)
                  : s.times.seconds(seq);
  return parallel::balance(kind, seq, k, mo, seconds);
}

Batch make_batch(const UNetOptions& o, int batch, int64_t side) {
  const int64_t out = *unet_output_size(o, side);
  std::vector<int64_t> in_shape = {batch, o.in_channels}, out_shape = {batch};
  for (int d = 0; d < o.dims; ++d) {
    in_shape.push_back(side);
    out_shape.push_back(out);
  }
  return {torch::randn(in_shape), torch::randint(0, o.classes, out_shape, torch::kInt64)};
}

// This rank's stage in training: built, one step and Adam update (gradients and moments
// allocated, kernels set up), then the measured steady step.
StagePeak measure_stage_peak(const UNetImpl& net, int64_t side, parallel::Communicator& pipeline,
                             parallel::Communicator& data, const parallel::PipelineOptions& po, const Batch& b) {
  StagePeak r;
  const PeakMemoryMeter first;
  parallel::PipelineTrainer t(net, side, pipeline, data, po);
  torch::optim::Adam adam(t.stage()->parameters(), torch::optim::AdamOptions(1e-4));
  t.train_step(b.input, b.target);
  adam.step();
  r.state = training_state_bytes(t.stage()->parameters(), adam);
  r.one_time = resident_bytes() - first.start_bytes() - r.state;
  const PeakMemoryMeter steady;
  t.train_step(b.input, b.target);
  adam.step();
  r.step = steady.peak_increase();
  r.total = r.state + r.step;
  return r;
}

}  // namespace tessera::bench::pipeline_bench
