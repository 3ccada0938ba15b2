#include "tile_sampler.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/tensor_io.hpp"

namespace tessera::detail {
namespace {

// A label at or above `classes` is a mistake in the data or in model.classes, never silently
// left out of the loss: the first one is an error naming the file, the value and the pixel.
// Negative labels, kNoDataLabel (255) and the band's nodata value mean "no label". The whole
// label image is read once, in slabs (bounded memory).
void check_label_values(const ImageSource& labels, int classes) {
  const ImageInfo& info = labels.info();
  const double nodata = info.nodata.empty() || !info.nodata.front() ? std::numeric_limits<double>::quiet_NaN()
                                                                     : *info.nodata.front();  // NaN: none
  const Index& extent = info.extent;
  const int d = static_cast<int>(extent.size());
  const int64_t slab = d == 2 ? 256 : 8;
  for (int64_t s = 0; s < extent[0]; s += slab) {
    Box b{Index(d, 0), extent};
    b.origin[0] = s;
    b.size[0] = std::min(slab, extent[0] - s);
    const Block<float> l = labels.read(b);
    const int64_t n = b.count();  // band 0 only: a label image with more is refused when read
    for (int64_t i = 0; i < n; ++i) {
      const float v = l.data[i];
      if (!(v >= classes) || v == kNoDataLabel || double(v) == nodata) continue;
      std::string at;
      int64_t rest = i;
      for (int a = d - 1; a >= 0; --a) {
        at = std::string(d - a == 1 ? "x " : d - a == 2 ? "y " : "z ") + std::to_string(b.origin[a] + rest % b.size[a]) +
             (at.empty() ? "" : ", ") + at;
        rest /= b.size[a];
      }
      std::ostringstream value;
      value << v;
      throw Error(info.path + ": label value " + value.str() + " at (" + at + ") is not a class of the model (classes: " +
                  std::to_string(classes) + ", so labels 0 … " + std::to_string(classes - 1) +
                  "; 255 or the nodata value marks an unlabelled pixel)");
    }
  }
}

}  // namespace

TileSampler::TileSampler(const std::vector<TrainingPair>& data, const UNetOptions& model, const TrainOptions& o,
                         Normalization norm, int replica, int replicas)
    : data_(data), model_(model), options_(o), norm_(std::move(norm)), replica_(replica), replicas_(replicas),
      rng_(o.seed),
      // `same` networks train on plain tiles (zero padding at their border, as usual for
      // them); `valid` networks read the halo their output needs.
      halo_(model.padding == Padding::kValid ? unet_halo(model) : 0) {
  for (const auto& p : data) weights_.push_back(static_cast<double>(p.region.count()));
  std::set<const ImageSource*> checked;
  for (const auto& p : data)
    if (p.labels && checked.insert(p.labels).second) check_label_values(*p.labels, model.classes);
  if (o.foreground_fraction > 0) index_foreground();
}

// Every replica draws the whole global batch (same random stream) and keeps its slice.
// Windows keep their halo inside the region where they can, so held-back pixels are not
// read, except at the image border where the halo is reflected exactly as at inference.
BatchPlan TileSampler::plan(int64_t tile) {
  const int64_t side = tile + unet_remainder(model_);
  BatchPlan plan;
  const int global = options_.batch * replicas_;
  const int first = options_.batch * replica_;
  for (int b = 0; b < global; ++b) {
    // Class-balanced draw: centre the tile on a labelled voxel of a random foreground class.
    const Foreground* centre = nullptr;
    if (!foreground_.empty() && std::bernoulli_distribution(options_.foreground_fraction)(rng_)) {
      const auto& pool = foreground_[std::uniform_int_distribution<size_t>(0, foreground_.size() - 1)(rng_)];
      centre = &pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng_)];
    }
    std::discrete_distribution<size_t> pick(weights_.begin(), weights_.end());
    TilePlan t;
    t.pair = centre ? centre->pair : pick(rng_);
    const TrainingPair& p = data_[t.pair];
    const Index& extent = p.image->info().extent;
    const int d = static_cast<int>(extent.size());
    t.out = Box{Index(d), Index(d, side)};
    for (int a = 0; a < d; ++a) {
      const int64_t r0 = p.region.origin[a], r1 = p.region.origin[a] + p.region.size[a];
      int64_t lo = r0 == 0 ? r0 : r0 + halo_;
      int64_t hi = (r1 == extent[a] ? r1 : r1 - halo_) - side;
      if (hi < lo) {  // region too small to keep the halo inside: relax, then clamp
        lo = r0;
        hi = r1 - side;
      }
      hi = std::max(lo, hi);
      t.out.origin[a] = centre ? std::clamp(centre->at[a] - side / 2, lo, hi)
                               : std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
    }
    t.flips.assign(d, false);
    if (options_.augment)
      for (int a = 0; a < d; ++a) t.flips[a] = std::bernoulli_distribution(0.5)(rng_);
    // Extra augmentations draw only when enabled, so the stream (and every earlier run's
    // tiles) is unchanged without them.
    const auto& g = options_.augmentation;
    const bool on = options_.augment;
    if (on && g.rotate90) t.rotations = std::uniform_int_distribution<int>(0, 3)(rng_);
    if (on && g.intensity_scale > 0)
      t.scale = float(std::uniform_real_distribution<double>(1 - g.intensity_scale, 1 + g.intensity_scale)(rng_));
    if (on && g.intensity_shift > 0)
      t.shift = float(std::uniform_real_distribution<double>(-g.intensity_shift, g.intensity_shift)(rng_));
    if (on && (g.gaussian_noise > 0 || g.uniform_noise > 0)) t.noise_seed = rng_() | 1;
    if (on) t.augment = draw_augmentation(g, d, rng_);
    if (b >= first && b < first + options_.batch) plan.tiles.push_back(std::move(t));
  }
  return plan;
}

Sample TileSampler::load(const BatchPlan& plan) const {
  std::vector<torch::Tensor> inputs, targets;
  for (const TilePlan& t : plan.tiles) {
    const TrainingPair& p = data_[t.pair];
    const Index& extent = p.image->info().extent;
    const int d = static_cast<int>(extent.size());
    Box in = t.out;
    for (int a = 0; a < d; ++a) {
      in.origin[a] -= halo_;
      in.size[a] += 2 * halo_;
    }
    Window w = read_window(*p.image, in, p.norm ? *p.norm : norm_);
    torch::Tensor target = torch::full(t.out.size, options_.loss.ignore_index, torch::kInt64);
    const Box inside = t.out.clipped(extent);
    if (!inside.empty() && p.labels) {  // unlabelled (a DSN's target domain): all ignored
      torch::Tensor view = target;
      for (int a = 0; a < d; ++a) view = view.narrow(a, inside.origin[a] - t.out.origin[a], inside.size[a]);
      view.copy_(read_labels(*p.labels, inside, model_.classes, options_.loss.ignore_index));
    }
    // Pixels without image data teach nothing.
    torch::Tensor valid = w.valid;
    if (model_.padding == Padding::kValid)
      for (int a = 0; a < d; ++a) valid = valid.narrow(a, halo_, t.out.size[a]);
    target.masked_fill_(valid.logical_not(), options_.loss.ignore_index);
    torch::Tensor x = w.values;
    for (int a = 0; a < d; ++a) {
      if (t.flips[a]) {
        x = x.flip({a + 1});
        target = target.flip({a});
      }
    }
    if (t.rotations) {  // square in the last two axes: the sampler draws cubic tiles
      x = torch::rot90(x, t.rotations, {d - 1, d});
      target = torch::rot90(target, t.rotations, {d - 2, d - 1});
    }
    const auto& g = options_.augmentation;
    apply_augmentation(t.augment, g, options_.loss.ignore_index, x, target);
    if (t.scale != 1 || t.shift != 0) x = x * t.scale + t.shift;
    if (t.noise_seed) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(t.noise_seed);
      if (g.gaussian_noise > 0) x = x + torch::randn(x.sizes(), gen, x.options()) * g.gaussian_noise;
      if (g.uniform_noise > 0) x = x + (torch::rand(x.sizes(), gen, x.options()) * 2 - 1) * g.uniform_noise;
    }
    inputs.push_back(x.contiguous());
    targets.push_back(target.contiguous());
  }
  return {torch::stack(inputs), torch::stack(targets)};
}

std::string TileSampler::rng_state() const {
  std::ostringstream s;
  s << rng_;
  return s.str();
}

void TileSampler::set_rng_state(const std::string& state) {
  std::istringstream s(state);
  s >> rng_;
  if (!s) throw Error("trainer state: damaged random state in the checkpoint");
}

// Per foreground class, a reservoir sample of its labelled pixels inside the regions,
// read once in slabs (bounded memory whatever the image size).
void TileSampler::index_foreground() {
  constexpr size_t kPerClass = 50000;
  std::vector<std::vector<Foreground>> pools(model_.classes);
  std::vector<int64_t> seen(model_.classes, 0);
  for (size_t k = 0; k < data_.size(); ++k) {
    if (!data_[k].labels) continue;
    const Box& region = data_[k].region;
    const int d = region.dims();
    const int64_t slab = d == 2 ? 256 : 8;
    for (int64_t s = region.origin[0]; s < region.origin[0] + region.size[0]; s += slab) {
      Box b = region;
      b.origin[0] = s;
      b.size[0] = std::min(slab, region.origin[0] + region.size[0] - s);
      const Block<float> l = data_[k].labels->read(b);
      Index at(d);
      for (int64_t i = 0; i < static_cast<int64_t>(l.data.size()); ++i) {
        const float v = l.data[i];
        if (!(v >= 1 && v < model_.classes)) continue;
        const int c = static_cast<int>(v);
        int64_t rest = i;
        for (int a = d - 1; a >= 0; --a) {
          at[a] = b.origin[a] + rest % b.size[a];
          rest /= b.size[a];
        }
        const int64_t n = seen[c]++;
        if (pools[c].size() < kPerClass) {
          pools[c].push_back({k, at});
        } else if (const int64_t j = std::uniform_int_distribution<int64_t>(0, n)(rng_); j < int64_t(kPerClass)) {
          pools[c][j] = {k, at};
        }
      }
    }
  }
  for (auto& pool : pools)
    if (!pool.empty()) foreground_.push_back(std::move(pool));
}

BatchLoader::BatchLoader(const TileSampler& sampler) : sampler_(sampler), thread_([this] { work(); }) {}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BatchLoader::submit(BatchPlan plan) {
  {
    std::lock_guard lock(mutex_);
    plans_.push_back(std::move(plan));
    ++in_flight_;
  }
  cv_.notify_all();
}

Sample BatchLoader::take() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return !ready_.empty() || error_; });
  if (error_) std::rethrow_exception(error_);
  Sample s = std::move(ready_.front());
  ready_.pop_front();
  --in_flight_;
  return s;
}

size_t BatchLoader::pending() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

void BatchLoader::work() {
  for (;;) {
    BatchPlan plan;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stop_ || !plans_.empty(); });
      if (stop_) return;
      plan = std::move(plans_.front());
      plans_.pop_front();
    }
    try {
      Sample s = sampler_.load(plan);
      std::lock_guard lock(mutex_);
      ready_.push_back(std::move(s));
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
    }
    cv_.notify_all();
  }
}

}  // namespace tessera::detail
