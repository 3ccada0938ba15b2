#include "tessera/core/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/fault_injection.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/sliding_window.hpp"
#include "tessera/core/train_observer.hpp"
#include "tessera/run/run_layout.hpp"
#include "tile_sampler.hpp"
#include "train_model.hpp"
#include "validation.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using detail::ModelLoss;
using detail::Sample;
using detail::TrainModel;

// What a checkpoint needs beyond model and optimiser to continue the run exactly.
struct ResumeState {
  // Each tile stream's sampler state (one per domain, of every domain group) before the batch
  // of the next step was drawn; one stream is stored as a string, several as a list.
  std::vector<std::string> rng;
  double best = -1;
  int64_t bad_epochs = 0;

  std::string to_json() const {
    nlohmann::json streams = rng.size() == 1 ? nlohmann::json(rng[0]) : nlohmann::json(rng);
    return nlohmann::json{{"rng", streams}, {"best", best}, {"bad_epochs", bad_epochs}}.dump();
  }
  static ResumeState from_json(const std::string& path, const std::string& text) {
    if (text.empty()) throw Error(path + ": checkpoint holds no trainer state (written by an older tessera?); cannot resume");
    try {
      const auto j = nlohmann::json::parse(text);
      const auto& r = j.at("rng");
      std::vector<std::string> rng = r.is_string() ? std::vector<std::string>{r.get<std::string>()}
                                                   : r.get<std::vector<std::string>>();
      return {std::move(rng), j.at("best").get<double>(), j.at("bad_epochs").get<int64_t>()};
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ": damaged trainer state (" + e.what() + ")");
    }
  }
};

// How a run stopped by divergence can go on: from the checkpoint it kept.
std::string kept_checkpoint_note(const std::string& last) {
  std::error_code ec;
  return fs::exists(last, ec) ? "; the last good checkpoint is kept: " + last + " (continue with --resume auto)"
                              : "; no checkpoint was written before it";
}

std::string non_finite_name(double v) { return std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf"; }

// A finite loss can still come with an update that overflowed the weights; such a model
// must not be saved over the last good one.
void require_finite_weights(torch::nn::Module& model, int64_t step, const std::string& last) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model.named_parameters())
    if (!torch::isfinite(p.value()).all().item<bool>())
      throw Error("step " + std::to_string(step) + ": weights became NaN or Inf (parameter " + p.key() +
                  "; learning rate too high?)" + kept_checkpoint_note(last));
}

// Mean Dice over the classes the loss scores (class 0 left out when the loss leaves the
// background out), ignoring classes absent from both truth and prediction.
double mean_dice(const std::vector<double>& dice, bool include_background) {
  double sum = 0;
  int n = 0;
  for (size_t c = include_background || dice.size() < 2 ? 0 : 1; c < dice.size(); ++c)
    if (std::isfinite(dice[c])) {
      sum += dice[c];
      ++n;
    }
  return n ? sum / n : 0;
}

// Image and label of every pair agree in size, and the image has the model's bands.
void check_pairs(const std::vector<TrainingPair>& data, const std::vector<TrainingPair>& validation,
                 const UNetOptions& model) {
  if (data.empty()) throw Error("train: no image/label pairs");
  for (const auto* set : {&data, &validation})
    for (const auto& p : *set) {
      if (p.image->info().extent != p.labels->info().extent)
        throw Error(p.labels->info().path + ": label size " + to_string(p.labels->info().extent) +
                    " differs from image size " + to_string(p.image->info().extent) + " of " + p.image->info().path);
      if (p.image->info().channels != model.in_channels)
        throw Error(p.image->info().path + ": has " + std::to_string(p.image->info().channels) +
                    " channels but the model expects " + std::to_string(model.in_channels));
    }
}

// What one optimiser step did.
struct StepResult {
  double lr = 0;
  std::optional<double> loss;  // none when no micro-batch had a labelled pixel
  double grad_norm = 0;        // before clipping; 0 without clipping
};

// How an epoch ended.
struct EpochEnd {
  bool improved = false;  // a new best validation Dice
  bool stop = false;      // early stopping
};

// One tile stream: a domain's sampler (its own random stream) and the loader reading its batches.
struct Stream {
  Stream(const std::vector<TrainingPair>& data, const UNetOptions& model, const TrainOptions& o, const Normalization& norm,
         int replica, int replicas)
      : sampler(data, model, o, norm, replica, replicas) {}
  detail::TileSampler sampler;
  std::optional<detail::BatchLoader> loader;
};

// One call of train(): the model, its optimiser and tile samplers, the batches read ahead and
// what is reported. train() calls the steps in order: resume_from (optional), begin, then
// run_step / report_step / validate_epoch / save_checkpoints per step, and finish.
class Training {
 public:
  Training(TrainModel& model, const std::vector<std::vector<TrainingPair>>& data, const TrainOptions& options,
           CheckpointMeta meta, TrainHooks& hooks, const std::vector<TrainingPair>& validation, TrainObserver* observer)
      : model_(model),
        net_(model.unet()),
        options_(options),
        meta_(std::move(meta)),
        hooks_(hooks),
        validation_(validation),
        observer_(hooks.writes_outputs() ? observer : nullptr),
        writer_(hooks.writes_outputs()),
        replicas_(hooks.replicas()),
        opt_(scaled(options.optimizer, options.scale_learning_rate ? replicas_ : 1)),
        last_(RunLayout(options.run_dir).last_checkpoint()),
        optimizer_(make_optimizer(model.module().parameters(), opt_)),
        device_(net_->device()),
        sync_guard_{net_} {
    for (int d : model.domains())
      streams_.push_back(std::make_unique<Stream>(data[size_t(d)], net_->options(), model.stream_options(options, d),
                                                  meta_.norm, hooks.replica(), replicas_));
  }

  int64_t first_step() const { return first_step_; }
  void resume_from(const std::string& path);
  void begin();
  StepResult run_step(int64_t step);
  void report_step(int64_t step, const StepResult& r);
  EpochEnd validate_epoch(int64_t step);
  void save_checkpoints(int64_t step, const EpochEnd& end);
  TrainReport finish(int64_t last_step, bool stopped_early);

 private:
  static OptimizerOptions scaled(OptimizerOptions o, int factor) {
    o.learning_rate *= factor;
    return o;
  }
  int64_t epoch_of(int64_t step) const { return (step - 1) / options_.steps_per_epoch; }
  void plan_more();
  std::optional<ModelLoss> micro_batch(int64_t step, double lr, bool last);
  std::vector<std::string> rng_states() const;

  TrainModel& model_;
  UNet& net_;
  const TrainOptions& options_;
  CheckpointMeta meta_;
  TrainHooks& hooks_;
  const std::vector<TrainingPair>& validation_;
  TrainObserver* observer_;  // null on replicas that write nothing
  const bool writer_;
  const int replicas_;
  const OptimizerOptions opt_;
  const std::string last_;  // RUN/checkpoints/last.pt, named in errors and the report
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  const torch::Device device_;  // where the weights are: each micro-batch is moved there
  ResumeState state_;
  int64_t first_step_ = 1;

  // Synchronised batch norm sums its statistics through the hooks; detached again however
  // training ends (declared before the loader: outlives its thread).
  struct SyncGuard {
    UNet& net;
    ~SyncGuard() { net->synchronise_batch_norm({}); }
  } sync_guard_;

  // Batches are planned on this thread (one random stream per domain) `prefetch` micro-batches
  // ahead and read on the loaders' threads. The sampler states saved with a checkpoint are
  // those before the first batch not yet consumed.
  std::vector<std::unique_ptr<Stream>> streams_;
  std::deque<std::vector<std::string>> planned_states_;
  int64_t planned_ = 0;  // micro-batches planned so far

  std::optional<ProgressBar> bar_;
  std::chrono::steady_clock::time_point start_;
  std::vector<double> losses_;
  std::vector<std::pair<std::string, double>> step_terms_;  // the last step's named loss terms
  int64_t tiles_done_ = 0, pixels_done_ = 0;
  std::string best_checkpoint_;
};

std::vector<std::string> Training::rng_states() const {
  std::vector<std::string> states;
  for (const auto& s : streams_) states.push_back(s->sampler.rng_state());
  return states;
}

void Training::resume_from(const std::string& path) {
  LoadedCheckpoint ck = load_checkpoint(path);
  if (!(ck.meta.model == net_->options()))
    throw Error(path + ": checkpoint model differs from the configured one; cannot resume");
  {
    torch::NoGradGuard no_grad;
    auto src = ck.net->named_parameters(), dst = net_->named_parameters();
    for (auto& p : dst) p.value().copy_(src[p.key()]);
    auto sb = ck.net->named_buffers(), db = net_->named_buffers();
    for (auto& b : db) b.value().copy_(sb[b.key()]);
  }
  model_.resume_extra(path, ck.meta, *optimizer_, opt_);
  state_ = ResumeState::from_json(path, ck.meta.trainer_state);
  const size_t total = size_t(model_.total_domains());
  if (state_.rng.size() != total)
    throw Error(path + ": checkpoint holds " + std::to_string(state_.rng.size()) + " tile streams, this run draws " +
                std::to_string(total) + "; cannot resume");
  const std::vector<int> domains = model_.domains();
  for (size_t k = 0; k < streams_.size(); ++k) streams_[k]->sampler.set_rng_state(state_.rng[size_t(domains[k])]);
  first_step_ = ck.meta.step + 1;
  if (first_step_ > options_.steps)
    throw Error(path + ": run already finished (step " + std::to_string(ck.meta.step) + " of " +
                std::to_string(options_.steps) + ")");
}

void Training::begin() {
  const bool resumed = !options_.resume.empty();
  if (observer_) observer_->on_begin(resumed ? std::optional<int64_t>(first_step_ - 1) : std::nullopt);
  if (writer_ && resumed)
    std::fprintf(stderr, "train: resumed from step %lld (%s); continuing at step %lld of %lld\n",
                 static_cast<long long>(first_step_ - 1), options_.resume.c_str(), static_cast<long long>(first_step_),
                 static_cast<long long>(options_.steps));
  // Resume state is broadcast implicitly: every replica loaded the same checkpoint, and a
  // fresh run broadcasts replica 0's initialisation.
  if (!resumed) hooks_.on_start(net_);
  // Identity for one process, so one process runs the very same arithmetic.
  if (options_.sync_batch_norm) net_->synchronise_batch_norm([this](torch::Tensor& t) { hooks_.sum(t); });
  model_.module().train();
  if (options_.channels_last) model_.use_channels_last();

  for (auto& s : streams_) s->loader.emplace(s->sampler);
  planned_ = (first_step_ - 1) * options_.accumulate;
  plan_more();
  bar_.emplace("train", options_.steps - first_step_ + 1, "steps", options_.progress && writer_);
  start_ = std::chrono::steady_clock::now();
}

void Training::plan_more() {
  const int64_t total_micro = options_.steps * options_.accumulate;
  while (planned_ < total_micro && int64_t(planned_states_.size()) < options_.prefetch) {
    const int64_t epoch = planned_ / options_.accumulate / options_.steps_per_epoch;
    planned_states_.push_back(rng_states());
    for (auto& s : streams_) s->loader->submit(s->sampler.plan(options_.tile_at_epoch(epoch)));
    ++planned_;
  }
}

// Forward and backward of the next micro-batch (one batch per stream); its loss, none when
// it taught nothing (no labelled pixel).
std::optional<ModelLoss> Training::micro_batch(int64_t step, double lr, bool last) {
  std::vector<Sample> samples;
  for (auto& stream : streams_) {
    Sample s = stream->loader->take();
    s.input = s.input.to(device_);  // tiles are cut on the host, trained where the weights are
    s.target = s.target.to(device_);
    if (fault_nan_at_step(step)) s.input.fill_(std::numeric_limits<float>::quiet_NaN());  // TESSERA_TEST_NAN
    tiles_done_ += s.target.size(0) * replicas_;
    pixels_done_ += s.target.numel() * replicas_;
    samples.push_back(std::move(s));
  }
  planned_states_.pop_front();
  plan_more();
  const double share = 1.0 / double(options_.accumulate);
  ModelLoss loss = model_.loss(samples, options_, hooks_, share, double(step - 1) / double(options_.steps));
  if (loss.labelled <= 0) return std::nullopt;
  if (!std::isfinite(loss.value))
    throw Error("step " + std::to_string(step) + ": loss is " + non_finite_name(loss.value) + " (learning rate " +
                std::to_string(lr) + " too high, or NaN in the input?)" + kept_checkpoint_note(last_));
  if (loss.for_backward.defined()) {
    hooks_.before_backward(net_, last);
    (loss.for_backward / double(options_.accumulate)).backward();
  }
  return loss;
}

StepResult Training::run_step(int64_t step) {
  StepResult r;
  r.lr = learning_rate_at(opt_, step, options_.steps);
  set_learning_rate(*optimizer_, r.lr);
  optimizer_->zero_grad();
  fault_point(FaultPoint::kStep, step);  // test hooks: TESSERA_TEST_HANG / _THROW
  double step_loss = 0;
  bool labelled = false;
  step_terms_.clear();
  for (int micro = 0; micro < options_.accumulate; ++micro)
    if (const std::optional<ModelLoss> loss = micro_batch(step, r.lr, micro + 1 == options_.accumulate)) {
      step_loss += loss->value / options_.accumulate;
      labelled = true;
      step_terms_.resize(loss->terms.size());
      for (size_t k = 0; k < loss->terms.size(); ++k)
        step_terms_[k] = {loss->terms[k].first, step_terms_[k].second + loss->terms[k].second / options_.accumulate};
    }
  if (labelled) {
    r.loss = step_loss;
    hooks_.on_gradients(net_);
    model_.on_gradients(hooks_);
    if (options_.grad_clip > 0) r.grad_norm = model_.clip_gradients(options_.grad_clip, hooks_);
    optimizer_->step();
    losses_.push_back(step_loss);
  }
  hooks_.on_step(step, r.loss.value_or(std::numeric_limits<double>::quiet_NaN()));
  return r;
}

void Training::report_step(int64_t step, const StepResult& r) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  StepMetrics m;
  m.step = step;
  m.epoch = epoch_of(step);
  m.loss = r.loss;
  m.lr = r.lr;
  m.global_batch = int64_t(options_.batch) * replicas_ * options_.accumulate * model_.total_domains();
  m.tile = options_.tile_at_epoch(m.epoch);
  m.tiles_per_s = double(tiles_done_) / elapsed;
  m.pixels_per_s = double(pixels_done_) / elapsed;
  m.elapsed_s = elapsed;
  if (options_.grad_clip > 0) m.grad_norm = r.grad_norm;
  m.communication = hooks_.last_communication();
  m.loss_terms = step_terms_;
  if (observer_) observer_->on_step(m);
  char extra[96];
  std::snprintf(extra, sizeof extra, "loss %.4f  %.1f tiles/s", r.loss.value_or(std::numeric_limits<double>::quiet_NaN()),
                m.tiles_per_s);
  bar_->update(step - first_step_ + 1, extra);
}

// At the end of an epoch: validate, keep the best, maybe stop.
EpochEnd Training::validate_epoch(int64_t step) {
  EpochEnd end;
  const bool epoch_end = step % options_.steps_per_epoch == 0 || step == options_.steps;
  if (!epoch_end || validation_.empty()) return end;
  const int64_t epoch = epoch_of(step);
  const int64_t tile = std::max<int64_t>(options_.tile_at_epoch(epoch), 2 * options_.tile);
  torch::Tensor confusion =
      detail::validation_confusion(net_, validation_, meta_.norm, tile, hooks_.replica(), replicas_);
  if (!options_.channels_last) net_->use_contiguous();  // inference switched it to channels-last
  net_->train();
  hooks_.sum(confusion);
  const std::vector<double> dice = detail::dice_from_confusion(confusion);
  const double mean = mean_dice(dice, options_.loss.include_background);
  end.improved = mean > state_.best;
  if (end.improved) {
    state_.best = mean;
    state_.bad_epochs = 0;
  } else {
    ++state_.bad_epochs;
  }
  end.stop = options_.early_stopping > 0 && state_.bad_epochs >= options_.early_stopping;
  if (observer_) {
    ValidationMetrics v{step, epoch, mean, state_.best, {}};
    for (double d : dice) v.val_dice.push_back(std::isfinite(d) ? std::optional<double>(d) : std::nullopt);
    observer_->on_validation(v);
  }
  return end;
}

// When due: last.pt, a kept step-NNNNNN.pt, best.pt — never a diverged model over a good one.
void Training::save_checkpoints(int64_t step, const EpochEnd& end) {
  if (!(step % options_.checkpoint_every == 0 || step == options_.steps || end.improved || end.stop)) return;
  // Collectives: what other processes hold (a DSN's other domain groups) comes to the writer.
  std::vector<std::string> streams =
      model_.stream_states(planned_states_.empty() ? rng_states() : planned_states_.front(), hooks_);
  const TrainModel::CheckpointParts parts = model_.checkpoint_parts(*optimizer_, opt_, hooks_);
  if (!writer_) return;
  meta_.step = step;
  meta_.epoch = epoch_of(step);
  meta_.training_window = training_window(net_->options(), options_.tile_at_epoch(meta_.epoch));
  state_.rng = std::move(streams);
  meta_.trainer_state = state_.to_json();
  require_finite_weights(model_.module(), step, last_);
  if (end.improved) best_checkpoint_ = RunLayout(options_.run_dir).best_checkpoint();
  if (!observer_) return;
  const std::string bytes = checkpoint_bytes(net_, meta_, parts.optimizer, parts.extra);
  observer_->on_checkpoint({CheckpointKind::kLast, step, bytes});
  if (options_.keep_last > 1) observer_->on_checkpoint({CheckpointKind::kStep, step, bytes, options_.keep_last});
  if (end.improved) observer_->on_checkpoint({CheckpointKind::kBest, step, bytes});
}

TrainReport Training::finish(int64_t last_step, bool stopped_early) {
  bar_->finish();
  TrainReport report;
  report.steps = last_step - first_step_ + 1;
  report.last_step = last_step;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const size_t tail = std::max<size_t>(1, losses_.size() / 10);
  for (size_t i = losses_.size() - std::min(tail, losses_.size()); i < losses_.size(); ++i)
    report.final_loss += losses_[i];
  report.final_loss /= double(std::min(tail, std::max<size_t>(losses_.size(), 1)));
  report.tiles_per_second = double(tiles_done_) / report.seconds;
  report.best_validation = state_.best;
  report.stopped_early = stopped_early;
  report.checkpoint = last_;
  report.best_checkpoint = best_checkpoint_;
  return report;
}

}  // namespace

void TrainOptions::validate(const UNetOptions& model) const {
  if (precision != "fp32" && precision != "bf16")
    throw Error("train.precision: '" + precision + "' is not fp32 or bf16");
  if (precision == "bf16" && model.dims == 3 && !torch::cuda::is_available())
    throw Error("train.precision bf16: 3-D models train in fp32 on the CPU (this LibTorch has no bfloat16 3-D max "
                "pooling)");
  const int64_t a = unet_alignment(model);
  if (tile <= 0 || tile % a != 0)
    throw Error("train.tile " + std::to_string(tile) + ": must be a positive multiple of " + std::to_string(a));
  for (const auto& c : curriculum) {
    if (c.tile <= 0 || c.tile % a != 0)
      throw Error("train.curriculum: tile " + std::to_string(c.tile) + " must be a positive multiple of " +
                  std::to_string(a));
    if (c.from_epoch < 0) throw Error("train.curriculum: epoch must be >= 0");
  }
  if (batch < 1) throw Error("train.batch: must be >= 1");
  if (accumulate < 1) throw Error("train.accumulate: must be >= 1");
  if (steps < 1) throw Error("train.steps: must be >= 1");
  if (steps_per_epoch < 1) throw Error("train.steps_per_epoch: must be >= 1");
  optimizer.validate();
  if (grad_clip < 0) throw Error("train.grad_clip: must be >= 0");
  if (checkpoint_every < 1) throw Error("train.checkpoint_every: must be >= 1");
  if (keep_last < 1) throw Error("train.keep_last: must be >= 1");
  if (early_stopping < 0) throw Error("train.early_stopping: must be >= 0");
  if (prefetch < 1) throw Error("train.prefetch: must be >= 1");
  if (foreground_fraction < 0 || foreground_fraction > 1) throw Error("train.foreground_fraction: must be in [0, 1]");
  if (deep_supervision && (!model.is_builtin() || model.padding != Padding::kSame))
    throw Error("train.deep_supervision: needs the built-in U-Net with model.padding same (its decoder levels then "
                "cover the whole tile)");
  const auto& g = augmentation;
  if (g.intensity_scale < 0 || g.intensity_scale >= 1) throw Error("train.augment_intensity_scale: must be in [0, 1)");
  if (g.intensity_shift < 0) throw Error("train.augment_intensity_shift: must be >= 0");
  if (g.gaussian_noise < 0) throw Error("train.augment_gaussian_noise: must be >= 0");
  if (g.uniform_noise < 0) throw Error("train.augment_uniform_noise: must be >= 0");
  detail::validate_augmentation(g);
  loss.validate(model.classes);
  if (run_dir.empty()) throw Error("train.run_dir: required");
}

int64_t TrainOptions::tile_at_epoch(int64_t epoch) const {
  int64_t t = tile, from = -1;
  for (const auto& c : curriculum)
    if (c.from_epoch <= epoch && c.from_epoch >= from) {
      t = c.tile;
      from = c.from_epoch;
    }
  return t;
}

namespace detail {

TrainReport run_training(TrainModel& model, const std::vector<std::vector<TrainingPair>>& data,
                         const TrainOptions& options, CheckpointMeta meta, TrainHooks* hooks_in,
                         const std::vector<TrainingPair>& validation, TrainObserver* observer) {
  TrainHooks one_process;
  Training run(model, data, options, std::move(meta), hooks_in ? *hooks_in : one_process, validation, observer);
  if (!options.resume.empty()) run.resume_from(options.resume);
  run.begin();
  int64_t step = run.first_step();
  for (; step <= options.steps; ++step) {
    run.report_step(step, run.run_step(step));
    const EpochEnd end = run.validate_epoch(step);
    run.save_checkpoints(step, end);
    if (end.stop) return run.finish(step, true);
  }
  return run.finish(step - 1, false);
}

}  // namespace detail

TrainReport train(UNet& net, const std::vector<TrainingPair>& data, const TrainOptions& options, CheckpointMeta meta,
                  TrainHooks* hooks, const std::vector<TrainingPair>& validation, TrainObserver* observer) {
  options.validate(net->options());
  check_pairs(data, validation, net->options());
  const std::unique_ptr<TrainModel> model = detail::unet_train_model(net, options.deep_supervision);
  return detail::run_training(*model, {data}, options, std::move(meta), hooks, validation, observer);
}

}  // namespace tessera
