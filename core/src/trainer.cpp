#include "tessera/core/trainer.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/tensor_io.hpp"

namespace tessera {
namespace {

struct Sample {
  torch::Tensor input;   // (B, C, spatial...)
  torch::Tensor target;  // (B, spatial...) int64
};

// Draws output boxes inside each pair's region. Windows keep their halo inside the region
// where they can, so held-back pixels are not read, except at the image border where the
// halo is reflected exactly as at inference.
class TileSampler {
 public:
  TileSampler(const std::vector<TrainingPair>& data, const UNetOptions& model, const TrainOptions& o)
      : data_(data), model_(model), options_(o), rng_(o.seed), side_(o.tile + unet_remainder(model)),
        // `same` networks train on plain tiles (zero padding at their border, as usual for
        // them); `valid` networks read the halo their output needs.
        halo_(model.padding == Padding::kValid ? unet_halo(model) : 0) {
    for (const auto& p : data) weights_.push_back(static_cast<double>(p.region.count()));
    if (o.foreground_fraction > 0) index_foreground();
  }

  /// The tiles of this replica's slice of the next global batch. Every replica draws the
  /// whole global batch (same random stream) and reads only the windows of its slice.
  Sample next() {
    std::vector<torch::Tensor> inputs, targets;
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
      const TrainingPair& p = data_[centre ? centre->pair : pick(rng_)];
      const Index& extent = p.image->info().extent;
      const int d = static_cast<int>(extent.size());
      Box out{Index(d), Index(d, side_)};
      for (int a = 0; a < d; ++a) {
        const int64_t r0 = p.region.origin[a], r1 = p.region.origin[a] + p.region.size[a];
        int64_t lo = r0 == 0 ? r0 : r0 + halo_;
        int64_t hi = (r1 == extent[a] ? r1 : r1 - halo_) - side_;
        if (hi < lo) {  // region too small to keep the halo inside: relax, then clamp
          lo = r0;
          hi = r1 - side_;
        }
        hi = std::max(lo, hi);
        out.origin[a] = centre ? std::clamp(centre->at[a] - side_ / 2, lo, hi)
                               : std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
      }
      std::vector<bool> flips(d, false);
      if (options_.augment)
        for (int a = 0; a < d; ++a) flips[a] = std::bernoulli_distribution(0.5)(rng_);
      if (b < first || b >= first + options_.batch) continue;  // another replica's tile
      Box in = out;
      for (int a = 0; a < d; ++a) {
        in.origin[a] -= halo_;
        in.size[a] += 2 * halo_;
      }
      Window w = read_window(*p.image, in, norm_);
      torch::Tensor target = torch::full(out.size, options_.loss.ignore_index, torch::kInt64);
      const Box inside = out.clipped(extent);
      if (!inside.empty()) {
        torch::Tensor view = target;
        for (int a = 0; a < d; ++a) view = view.narrow(a, inside.origin[a] - out.origin[a], inside.size[a]);
        view.copy_(read_labels(*p.labels, inside, model_.classes, options_.loss.ignore_index));
      }
      // Pixels without image data teach nothing.
      torch::Tensor valid = w.valid;
      if (model_.padding == Padding::kValid)
        for (int a = 0; a < d; ++a) valid = valid.narrow(a, halo_, side_);
      target.masked_fill_(valid.logical_not(), options_.loss.ignore_index);
      torch::Tensor x = w.values;
      for (int a = 0; a < d; ++a) {
        if (flips[a]) {
          x = x.flip({a + 1});
          target = target.flip({a});
        }
      }
      inputs.push_back(x);
      targets.push_back(target);
    }
    return {torch::stack(inputs), torch::stack(targets)};
  }

  void set_slice(int replica, int replicas) {
    replica_ = replica;
    replicas_ = replicas;
  }
  void set_normalization(Normalization n) { norm_ = std::move(n); }

 private:
  struct Foreground {
    size_t pair;
    Index at;
  };

  // Per foreground class, a reservoir sample of its labelled pixels inside the regions,
  // read once in slabs (bounded memory whatever the image size).
  void index_foreground() {
    constexpr size_t kPerClass = 50000;
    std::vector<std::vector<Foreground>> pools(model_.classes);
    std::vector<int64_t> seen(model_.classes, 0);
    for (size_t k = 0; k < data_.size(); ++k) {
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

  std::vector<std::vector<Foreground>> foreground_;
  const std::vector<TrainingPair>& data_;
  UNetOptions model_;
  TrainOptions options_;
  std::mt19937_64 rng_;
  int64_t side_, halo_;
  std::vector<double> weights_;
  Normalization norm_;
  int replica_ = 0, replicas_ = 1;
};

struct StepLoss {
  torch::Tensor for_backward;  // this replica's share of the global-batch loss (has a graph)
  double value = 0;            // the global-batch loss
  double labelled = 0;         // labelled pixels in the global batch
};

// Dice + CE of the global batch from statistics summed over replicas. Each replica's own
// statistics keep their graph, the others' enter as constants, so backward gives this
// replica's share of the global gradient (TrainHooks contract). With one replica this is
// exactly dice_ce_loss.
StepLoss global_batch_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o,
                           TrainHooks& hooks) {
  const int64_t classes = logits.size(1);
  auto valid = (target != o.ignore_index);
  auto ce_sum = torch::nn::functional::cross_entropy(
      logits, target,
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(o.ignore_index).reduction(torch::kSum));
  auto count = valid.sum().to(torch::kFloat).reshape({1});
  auto safe = target.masked_fill(valid.logical_not(), 0);
  auto mask = valid.unsqueeze(1).to(logits.dtype());
  auto probs = torch::softmax(logits, 1) * mask;
  auto onehot = torch::one_hot(safe, classes).movedim(-1, 1).to(logits.dtype()) * mask;
  std::vector<int64_t> reduce{0};
  for (int64_t d = 2; d < logits.dim(); ++d) reduce.push_back(d);
  auto inter = (probs * onehot).sum(reduce);
  auto denom = probs.sum(reduce) + onehot.sum(reduce);

  auto local = torch::cat({ce_sum.reshape({1}), count, inter, denom}).detach().to(torch::kFloat).contiguous();
  torch::Tensor global = local.clone();
  hooks.sum(global);
  auto rest = global - local;
  StepLoss out;
  out.labelled = global[1].item<double>();
  if (out.labelled <= 0) return out;
  auto ce = (ce_sum + rest[0]) / global[1];
  auto inter_g = inter + rest.narrow(0, 2, classes);
  auto denom_g = denom + rest.narrow(0, 2 + classes, classes);
  auto dice = (2.0 * inter_g + o.smooth) / (denom_g + o.smooth);
  out.for_backward = o.ce_weight * ce + o.dice_weight * (1.0 - dice.mean());
  out.value = out.for_backward.item<double>();
  return out;
}

}  // namespace

void TrainOptions::validate(const UNetOptions& model) const {
  const int64_t a = unet_alignment(model);
  if (tile <= 0 || tile % a != 0)
    throw Error("train.tile " + std::to_string(tile) + ": must be a positive multiple of " + std::to_string(a));
  if (batch < 1) throw Error("train.batch: must be >= 1");
  if (steps < 1) throw Error("train.steps: must be >= 1");
  if (!(learning_rate > 0)) throw Error("train.learning_rate: must be > 0");
  if (checkpoint_every < 1) throw Error("train.checkpoint_every: must be >= 1");
  if (warmup_steps < 0) throw Error("train.warmup_steps: must be >= 0");
  if (foreground_fraction < 0 || foreground_fraction > 1) throw Error("train.foreground_fraction: must be in [0, 1]");
  if (run_dir.empty()) throw Error("train.run_dir: required");
}

TrainReport train(UNet& net, const std::vector<TrainingPair>& data, const TrainOptions& options, CheckpointMeta meta,
                  TrainHooks* hooks_in) {
  TrainHooks one_process;
  TrainHooks& hooks = hooks_in ? *hooks_in : one_process;
  const bool writer = hooks.writes_outputs();
  const int replicas = hooks.replicas();
  const int64_t global_batch = int64_t(options.batch) * replicas;
  const double lr = options.scale_learning_rate ? options.learning_rate * replicas : options.learning_rate;
  const UNetOptions& model = net->options();
  options.validate(model);
  if (data.empty()) throw Error("train: no image/label pairs");
  for (const auto& p : data) {
    if (p.image->info().extent != p.labels->info().extent)
      throw Error(p.labels->info().path + ": label size " + to_string(p.labels->info().extent) +
                  " differs from image size " + to_string(p.image->info().extent) + " of " + p.image->info().path);
    if (p.image->info().channels != model.in_channels)
      throw Error(p.image->info().path + ": has " + std::to_string(p.image->info().channels) +
                  " channels but the model expects " + std::to_string(model.in_channels));
  }
  namespace fs = std::filesystem;
  std::ofstream metrics;
  if (writer) {
    fs::create_directories(fs::path(options.run_dir) / "checkpoints");
    metrics.open(fs::path(options.run_dir) / "metrics.jsonl", std::ios::app);
    if (!metrics) throw Error(options.run_dir + "/metrics.jsonl: cannot open for writing");
  }

  TileSampler sampler(data, model, options);
  sampler.set_normalization(meta.norm);
  sampler.set_slice(hooks.replica(), replicas);
  hooks.on_start(net);
  // Synchronised batch norm sums its statistics through the hooks (identity for one process,
  // so one process runs the very same arithmetic); detached again however training ends.
  struct SyncGuard {
    UNet& net;
    ~SyncGuard() { net->synchronise_batch_norm({}); }
  } sync_guard{net};
  if (options.sync_batch_norm) net->synchronise_batch_norm([&hooks](torch::Tensor& t) { hooks.sum(t); });
  net->train();
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(lr));
  const std::string last = (fs::path(options.run_dir) / "checkpoints" / "last.pt").string();

  ProgressBar bar("train", options.steps, "steps", options.progress && writer);
  const auto start = std::chrono::steady_clock::now();
  std::future<Sample> next = std::async(std::launch::async, [&] { return sampler.next(); });
  std::vector<double> losses;
  for (int64_t step = 1; step <= options.steps; ++step) {
    Sample s = next.get();
    if (step < options.steps) next = std::async(std::launch::async, [&] { return sampler.next(); });
    const double step_lr = options.warmup_steps > 0 ? lr * std::min(1.0, double(step) / double(options.warmup_steps)) : lr;
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(step_lr);
    optimizer.zero_grad();
    auto logits = net->forward(s.input);
    StepLoss loss = global_batch_loss(logits, s.target, options.loss, hooks);
    const bool labelled = loss.labelled > 0;  // a batch without one labelled pixel teaches nothing
    double value = std::numeric_limits<double>::quiet_NaN();
    if (labelled) {
      value = loss.value;
      if (!std::isfinite(value))
        throw Error("train: loss became " + std::to_string(value) + " at step " + std::to_string(step) +
                    " (learning rate " + std::to_string(lr) + " too high, or NaN in the input?)");
      loss.for_backward.backward();
      hooks.on_gradients(net);
      optimizer.step();
      losses.push_back(value);
    }
    hooks.on_step(step, value);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double tiles_per_s = double(step * global_batch) / elapsed;
    nlohmann::json j{{"step", step},
                     {"loss", labelled ? nlohmann::json(value) : nlohmann::json(nullptr)},
                     {"lr", step_lr},
                     {"global_batch", global_batch},
                     {"tiles_per_s", tiles_per_s},
                     {"pixels_per_s", tiles_per_s * double(s.target[0].numel())},
                     {"elapsed_s", elapsed}};
    if (writer) {
      metrics << j.dump() << '\n';
      metrics.flush();
    }
    char extra[64];
    std::snprintf(extra, sizeof extra, "loss %.4f", value);
    bar.update(step, extra);
    if (writer && (step % options.checkpoint_every == 0 || step == options.steps)) {
      meta.step = step;
      save_checkpoint(last, net, meta, &optimizer);
    }
  }
  bar.finish();

  TrainReport report;
  report.steps = options.steps;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t tail = std::max<size_t>(1, losses.size() / 10);
  for (size_t i = losses.size() - std::min(tail, losses.size()); i < losses.size(); ++i) report.final_loss += losses[i];
  report.final_loss /= double(std::min(tail, std::max<size_t>(losses.size(), 1)));
  report.tiles_per_second = double(options.steps * global_batch) / report.seconds;
  report.checkpoint = last;
  return report;
}

}  // namespace tessera
