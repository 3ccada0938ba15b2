// --time-budget: the step shaped to the budget, then train.steps from a measured step time
// (train_parts.hpp).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "train_parts.hpp"
#include "tessera/core/error.hpp"

namespace tessera::engine::train {
namespace {

constexpr int64_t kProbeSteps = 6;        // the first is a warm-up (allocations, first reads)
constexpr double kTrainingShare = 0.85;   // the rest: validation epochs, checkpoints, the end

// The elapsed time of every step of a probe run.
struct StepClock : TrainObserver {
  std::vector<double> elapsed;
  void on_step(const StepMetrics& m) override { elapsed.push_back(m.elapsed_s); }
};

struct Probe {
  double per_step = 0;  ///< seconds per step after the warm-up
  double elapsed = 0;   ///< seconds the probe took
  size_t measured = 0;  ///< steps timed
};

// kProbeSteps steps of the run `t` on a throwaway network of `model` (same data, seed, tiles).
Probe probe_steps(const TrainOptions& t, const UNetOptions& model, const Dataset& data, const CheckpointMeta& meta) {
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
  // The median step: one step stalled by another process does not set the rate.
  std::vector<double> steps;
  for (size_t k = 1; k < clock.elapsed.size(); ++k) steps.push_back(clock.elapsed[k] - clock.elapsed[k - 1]);
  std::nth_element(steps.begin(), steps.begin() + long(steps.size() / 2), steps.end());
  return {steps[steps.size() / 2], clock.elapsed.back(), clock.elapsed.size() - 1};
}

double seconds_for_steps(double budget_s, double spent_s) {
  const double left = budget_s - spent_s;
  if (left <= 0)
    throw Error(fmt::format("--time-budget {:.0f} s: spent {:.0f} s before training could start; give a longer budget",
                            budget_s, spent_s));
  return left;
}

// The shape keys the plan set (not given by the file or a flag).
std::set<std::string> fixed_shape_keys(const std::vector<AutoChoice>& choices) {
  std::set<std::string> fixed = {"train.tile", "train.batch", "model.levels", "model.base_filters"};
  for (const AutoChoice& ch : choices)
    if (ch.given_by.empty()) fixed.erase(ch.key);
  return fixed;
}

void set_shape(RunConfig& c, const StepShape& s) {
  c.train.tile = s.tile;
  c.train.batch = s.batch;
  c.model.options.levels = s.levels;
  c.model.options.base_filters = s.base_filters;
}

// The plan's choices of the shape keys say what the budget made of them.
void record_shape(std::vector<AutoChoice>& choices, const StepShape& s, const std::set<std::string>& fixed) {
  const std::pair<const char*, int64_t> values[] = {
      {"train.tile", s.tile}, {"train.batch", s.batch}, {"model.levels", s.levels}, {"model.base_filters", s.base_filters}};
  for (AutoChoice& ch : choices)
    for (const auto& [key, value] : values)
      if (ch.key == key && !fixed.count(key) && ch.value != std::to_string(value)) {
        ch.why = fmt::format("{} (the plan's {}, shaped by --time-budget: see step_shape)", ch.why, ch.value);
        ch.value = std::to_string(value);
      }
}

}  // namespace

std::vector<AutoChoice> shape_to_budget(RunConfig& c, std::vector<AutoChoice>& choices, const Index& median_shape,
                                        const Dataset& data, CheckpointMeta& meta, double budget_s, double spent_s) {
  const std::set<std::string> fixed = fixed_shape_keys(choices);
  if (fixed.size() == 4 || median_shape.empty()) return {};
  const UNetOptions& model = c.model.options;
  const StepShape planned{c.train.tile, model.levels, model.base_filters, c.train.batch};
  const StepShape smallest = smallest_step_shape(planned, fixed);
  RunConfig probe_config = c;
  set_shape(probe_config, smallest);
  const Probe probe = probe_steps(probe_config.train, probe_config.model.options, data, meta);
  const double seconds_per_flop = probe.per_step / step_flops(model, smallest);
  const double seconds = kTrainingShare * seconds_for_steps(budget_s, spent_s + probe.elapsed);
  const ShapeFit fit = fit_step_shape(planned, fixed, model, *std::min_element(median_shape.begin(), median_shape.end()),
                                      seconds_per_flop, seconds);
  set_shape(c, fit.shape);
  meta.model = c.model.options;
  record_shape(choices, fit.shape, fixed);
  return {{"step_shape",
           fmt::format("{} tiles, {} levels, {} filters, batch {}", fit.shape.tile, fit.shape.levels, fit.shape.base_filters,
                       fit.shape.batch),
           fmt::format("{}; the rate from the median of {} steps of the smallest shape ({:.3g} s a step)", fit.why, probe.measured,
                       probe.per_step),
           ""}};
}

AutoChoice budget_steps(TrainOptions& t, const UNetOptions& model, const Dataset& data, const CheckpointMeta& meta,
                        double budget_s, double spent_s, double reserve_s) {
  const Probe probe = probe_steps(t, model, data, meta);
  const double spent = spent_s + probe.elapsed;
  const double left = seconds_for_steps(budget_s, spent + reserve_s);
  // Each epoch scores the validation cases: counted as one validation inference per epoch.
  const double per_epoch = reserve_s > 0 ? reserve_s / double(std::max<int64_t>(t.steps_per_epoch, 1)) : 0;
  t.steps = std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(kTrainingShare * left / std::max(probe.per_step + per_epoch, 1e-6))));
  const std::string reserved =
      reserve_s > 0 ? fmt::format(", {:.2f} s reserved for the validation inference (validation_inference)", reserve_s) : "";
  const std::string epochs =
      reserve_s > 0 ? fmt::format(" at {:.3g} s a step with the validation of every {}-step epoch (one validation "
                                  "inference)", probe.per_step + per_epoch, t.steps_per_epoch)
                    : "";
  return {"train.steps", std::to_string(t.steps),
          fmt::format("--time-budget {:.0f} s: {:.3g} s per step, the median of {} steps (after a warm-up step; this "
                      "machine, as loaded now); {:.2f} s spent opening the data and measuring{}: {:.2f} s left, {:.0f} % of it "
                      "for steps{} (the rest for checkpoints)",
                      budget_s, probe.per_step, probe.measured, spent, reserved, left, 100 * kTrainingShare, epochs),
          ""};
}

}  // namespace tessera::engine::train
