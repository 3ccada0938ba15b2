// --time-budget: train.steps from a measured step time (train_parts.hpp).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "train_parts.hpp"
#include "tessera/core/error.hpp"

namespace tessera::engine::train {
namespace {

constexpr int64_t kProbeSteps = 4;        // the first is a warm-up (allocations, first reads)
constexpr double kTrainingShare = 0.85;   // the rest: validation epochs, checkpoints, the end

// The elapsed time of every step of a probe run.
struct StepClock : TrainObserver {
  std::vector<double> elapsed;
  void on_step(const StepMetrics& m) override { elapsed.push_back(m.elapsed_s); }
};

}  // namespace

AutoChoice budget_steps(TrainOptions& t, const UNetOptions& model, const Dataset& data, const CheckpointMeta& meta,
                        double budget_s, double spent_s) {
  TrainOptions probe = t;
  probe.steps = kProbeSteps;
  probe.progress = false;
  probe.resume.clear();
  probe.early_stopping = 0;
  probe.checkpoint_every = kProbeSteps + 1;
  probe.curriculum.clear();  // the measured tile is the first epoch's
  probe.tile = t.tile_at_epoch(0);
  StepClock clock;
  {
    torch::manual_seed(t.seed);
    UNet net(model);
    tessera::train(net, data.pairs, probe, meta, nullptr, {}, &clock);
  }
  if (clock.elapsed.size() < 2) throw Error("--time-budget: the probe run took no steps to measure");
  const double per_step = (clock.elapsed.back() - clock.elapsed.front()) / double(clock.elapsed.size() - 1);
  const double left = budget_s - spent_s - clock.elapsed.back();
  if (left <= 0)
    throw Error(fmt::format("--time-budget {:.0f} s: spent {:.0f} s before training could start; give a longer budget",
                            budget_s, spent_s + clock.elapsed.back()));
  t.steps = std::max<int64_t>(1, static_cast<int64_t>(std::floor(kTrainingShare * left / std::max(per_step, 1e-6))));
  return {"train.steps", std::to_string(t.steps),
          fmt::format("--time-budget {:.0f} s: {:.3g} s per step measured over {} steps (after a warm-up step; this machine, "
                      "as loaded now), {:.0f} s left after opening the data and measuring, {:.0f} % of it for steps (the "
                      "rest for validation and checkpoints)",
                      budget_s, per_step, clock.elapsed.size() - 1, left, 100 * kTrainingShare),
          ""};
}

}  // namespace tessera::engine::train
