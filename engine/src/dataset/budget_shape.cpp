// fit_step_shape (auto_train.hpp): what a --time-budget affords, given back in nnU-Net's order.
#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/engine/auto_train.hpp"

namespace tessera::engine {
namespace {

constexpr int kMinBatch = 2;       // nnU-Net's minimum batch
constexpr int kMinFilters = 16;    // half nnU-Net's 32: 4× fewer FLOPs at the same context
constexpr int64_t kMinSide = 32;   // 3 pools to a 4-voxel bottleneck: a 4-level U-Net

int levels_for(int64_t side) { return 1 + pooling_per_axis({side})[0]; }

std::string describe(const StepShape& s, int dims) {
  std::string cube = std::to_string(s.tile);
  for (int d = 1; d < dims; ++d) cube += "×" + std::to_string(s.tile);
  return fmt::format("{} tiles, {} levels, {} filters, batch {}", cube, s.levels, s.base_filters, s.batch);
}

// One giving-back stage: applies `shrink` while it changes the shape and steps fall short.
class Shaper {
 public:
  Shaper(StepShape s, const UNetOptions& m, double seconds_per_flop, double seconds)
      : shape_(s), model_(m), rate_(seconds_per_flop), seconds_(seconds) {}
  double steps(const StepShape& s) const { return seconds_ / (rate_ * step_flops(model_, s)); }
  bool short_of_steps() const { return steps(shape_) < double(kMinBudgetSteps); }
  void stage(const std::string& what, const std::function<bool(StepShape&)>& shrink) {
    bool changed = false;
    while (short_of_steps()) {
      StepShape next = shape_;
      if (!shrink(next)) break;
      shape_ = next;
      changed = true;
    }
    if (changed) taken_.push_back(what);
  }
  const StepShape& shape() const { return shape_; }
  const std::vector<std::string>& taken() const { return taken_; }

 private:
  StepShape shape_;
  const UNetOptions& model_;
  double rate_, seconds_;
  std::vector<std::string> taken_;
};

// The tile one pooling-grid step smaller, not below `floor`; levels follow unless fixed.
std::function<bool(StepShape&)> shrink_tile(int64_t floor, bool levels_free) {
  return [floor, levels_free](StepShape& s) {
    const int64_t next = smaller_side_on_pooling_grid(s.tile);
    if (next < floor || next >= s.tile) return false;
    s.tile = next;
    if (!levels_free && levels_for(next) < s.levels) return false;  // the given depth needs the side
    if (levels_free) s.levels = std::min(s.levels, levels_for(next));
    return true;
  };
}

}  // namespace

double step_flops(const UNetOptions& model, const StepShape& s) {
  UNetOptions o = model;
  o.levels = s.levels;
  o.base_filters = s.base_filters;
  const Index tile(static_cast<size_t>(o.dims), s.tile);
  return double(s.batch) * box_layer_sequence(o, tile).flops();
}

StepShape smallest_step_shape(const StepShape& planned, const std::set<std::string>& fixed) {
  StepShape s = planned;
  if (!fixed.count("train.batch")) s.batch = std::min(s.batch, kMinBatch);
  if (!fixed.count("model.base_filters")) s.base_filters = std::min(s.base_filters, kMinFilters);
  if (!fixed.count("train.tile")) s.tile = std::min(s.tile, kMinSide);
  if (!fixed.count("model.levels")) s.levels = std::min(s.levels, levels_for(s.tile));
  return s;
}

ShapeFit fit_step_shape(const StepShape& planned, const std::set<std::string>& fixed, const UNetOptions& model,
                        int64_t context_side, double seconds_per_flop, double seconds) {
  Shaper s(planned, model, seconds_per_flop, seconds);
  const bool tile_free = !fixed.count("train.tile"), levels_free = !fixed.count("model.levels");
  const int64_t context = std::max(kMinSide, side_on_pooling_grid((context_side + 1) / 2));
  if (!fixed.count("train.batch"))
    s.stage("the batch to 2", [](StepShape& x) {
      if (x.batch <= kMinBatch) return false;
      x.batch = kMinBatch;
      return true;
    });
  if (tile_free) s.stage(fmt::format("the tile down to half the median case ({})", context), shrink_tile(context, levels_free));
  if (!fixed.count("model.base_filters"))
    s.stage("the filters halved", [](StepShape& x) {
      if (x.base_filters <= kMinFilters) return false;
      x.base_filters = std::max(kMinFilters, x.base_filters / 2);
      return true;
    });
  if (tile_free) s.stage(fmt::format("the tile down to {} (4 levels)", kMinSide), shrink_tile(kMinSide, levels_free));
  ShapeFit fit{s.shape(), s.steps(s.shape()), ""};
  const int dims = model.dims;
  std::string given = s.taken().empty() ? "nothing given back" : "given back: ";
  for (size_t k = 0; k < s.taken().size(); ++k) given += (k ? ", " : "") + s.taken()[k];
  fit.why = fmt::format(
      "--time-budget: at least {} steps (4 nnU-Net epochs of 250); at the measured {:.3g} GFLOP/s (training, forward "
      "FLOPs counted) {:.0f} s of steps afford {:.0f} of the plan's {} — {} (nnU-Net's order: batch, then patch down to "
      "half the case, then width, then patch to 4 levels): {:.0f} predicted{}",
      kMinBudgetSteps, 1e-9 / seconds_per_flop, seconds, s.steps(planned), describe(planned, dims), given,
      fit.predicted_steps, fit.predicted_steps < double(kMinBudgetSteps) ? ", fewer than wanted: the smallest shape" : "");
  return fit;
}

}  // namespace tessera::engine
