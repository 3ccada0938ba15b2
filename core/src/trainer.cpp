#include "tessera/core/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/fault_injection.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/run_layout.hpp"
#include "tile_sampler.hpp"
#include "validation.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using detail::Sample;

struct StepLoss {
  torch::Tensor for_backward;  // this replica's share of the global-batch loss (has a graph)
  double value = 0;            // the global-batch loss
  double labelled = 0;         // labelled pixels in the global batch
};

// The loss of the global batch from statistics summed over replicas. Each replica's own
// statistics keep their graph, the others' enter as constants, so backward gives this
// replica's share of the global gradient (TrainHooks contract). With one replica this is
// exactly the loss of the batch.
StepLoss global_batch_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o,
                           TrainHooks& hooks) {
  const torch::Tensor local = loss_statistics(logits, target, o);
  torch::Tensor global = local.detach().to(torch::kFloat).contiguous().clone();
  hooks.sum(global);
  StepLoss out;
  out.labelled = global[0].item<double>();
  if (out.labelled <= 0) return out;
  const torch::Tensor stats = local + (global.to(local.dtype()) - local.detach());
  out.for_backward = loss_from_statistics(stats, o, logits.size(1));
  out.value = out.for_backward.item<double>();
  return out;
}

// What a checkpoint needs beyond model and optimiser to continue the run exactly.
struct ResumeState {
  std::string rng;  // sampler state before the batch of the next step was drawn
  double best = -1;
  int64_t bad_epochs = 0;

  std::string to_json() const { return nlohmann::json{{"rng", rng}, {"best", best}, {"bad_epochs", bad_epochs}}.dump(); }
  static ResumeState from_json(const std::string& path, const std::string& text) {
    if (text.empty()) throw Error(path + ": checkpoint holds no trainer state (written by an older tessera?); cannot resume");
    try {
      const auto j = nlohmann::json::parse(text);
      return {j.at("rng").get<std::string>(), j.at("best").get<double>(), j.at("bad_epochs").get<int64_t>()};
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ": damaged trainer state (" + e.what() + ")");
    }
  }
};

// metrics.jsonl of a resumed run: lines after the checkpoint's step are from the part of
// the killed run that is being redone; drop them (rewritten atomically).
void truncate_metrics(const fs::path& metrics, int64_t step) {
  std::ifstream in(metrics);
  if (!in) return;
  const fs::path tmp = metrics.string() + ".partial";
  {
    std::ofstream out(tmp);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      try {
        if (nlohmann::json::parse(line).value("step", int64_t{0}) > step) continue;
      } catch (const nlohmann::json::exception&) {
        continue;  // a line cut by the kill
      }
      out << line << '\n';
    }
  }
  fs::rename(tmp, metrics);
}

// Keeps the newest `keep` step-NNNNNN.pt files.
void prune_step_checkpoints(const RunLayout& run, int keep) {
  const std::vector<std::string> files = run.step_checkpoints();
  for (size_t i = 0; i + keep < files.size(); ++i) fs::remove(files[i]);
}

// How a run stopped by divergence can go on: from the checkpoint it kept.
std::string kept_checkpoint_note(const std::string& last) {
  std::error_code ec;
  return fs::exists(last, ec) ? "; the last good checkpoint is kept: " + last + " (continue with --resume auto)"
                              : "; no checkpoint was written before it";
}

std::string non_finite_name(double v) { return std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf"; }

// A finite loss can still come with an update that overflowed the weights; such a model
// must not be saved over the last good one.
void require_finite_weights(UNet& net, int64_t step, const std::string& last) {
  torch::NoGradGuard no_grad;
  for (const auto& p : net->named_parameters())
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

}  // namespace

void TrainOptions::validate(const UNetOptions& model) const {
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
  const auto& g = augmentation;
  if (g.intensity_scale < 0 || g.intensity_scale >= 1) throw Error("train.augment_intensity_scale: must be in [0, 1)");
  if (g.intensity_shift < 0) throw Error("train.augment_intensity_shift: must be >= 0");
  if (g.gaussian_noise < 0) throw Error("train.augment_gaussian_noise: must be >= 0");
  if (g.uniform_noise < 0) throw Error("train.augment_uniform_noise: must be >= 0");
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

TrainReport train(UNet& net, const std::vector<TrainingPair>& data, const TrainOptions& options, CheckpointMeta meta,
                  TrainHooks* hooks_in, const std::vector<TrainingPair>& validation) {
  TrainHooks one_process;
  TrainHooks& hooks = hooks_in ? *hooks_in : one_process;
  const bool writer = hooks.writes_outputs();
  const int replicas = hooks.replicas();
  const int64_t global_batch = int64_t(options.batch) * replicas * options.accumulate;
  OptimizerOptions opt = options.optimizer;
  if (options.scale_learning_rate) opt.learning_rate *= replicas;
  const UNetOptions& model = net->options();
  options.validate(model);
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
  const RunLayout run(options.run_dir);
  const fs::path checkpoints = run.checkpoints_dir();
  const std::string last = run.last_checkpoint();
  const std::string best_path = run.best_checkpoint();
  const fs::path metrics_path = run.metrics();

  detail::TileSampler sampler(data, model, options, meta.norm, hooks.replica(), replicas);
  auto optimizer = make_optimizer(net->parameters(), opt);
  int64_t first_step = 1;
  ResumeState state;
  if (!options.resume.empty()) {
    LoadedCheckpoint ck = load_checkpoint(options.resume);
    if (!(ck.meta.model == model))
      throw Error(options.resume + ": checkpoint model differs from the configured one; cannot resume");
    {
      torch::NoGradGuard no_grad;
      auto src = ck.net->named_parameters(), dst = net->named_parameters();
      for (auto& p : dst) p.value().copy_(src[p.key()]);
      auto sb = ck.net->named_buffers(), db = net->named_buffers();
      for (auto& b : db) b.value().copy_(sb[b.key()]);
    }
    load_optimizer_state(options.resume, *optimizer);
    state = ResumeState::from_json(options.resume, ck.meta.trainer_state);
    sampler.set_rng_state(state.rng);
    first_step = ck.meta.step + 1;
    if (first_step > options.steps)
      throw Error(options.resume + ": run already finished (step " + std::to_string(ck.meta.step) + " of " +
                  std::to_string(options.steps) + ")");
  }
  std::ofstream metrics;
  if (writer) {
    fs::create_directories(checkpoints);
    if (!options.resume.empty()) {
      truncate_metrics(metrics_path, first_step - 1);
      std::fprintf(stderr, "train: resumed from step %lld (%s); continuing at step %lld of %lld\n",
                   static_cast<long long>(first_step - 1), options.resume.c_str(), static_cast<long long>(first_step),
                   static_cast<long long>(options.steps));
    }
    metrics.open(metrics_path, std::ios::app);
    if (!metrics) throw Error(metrics_path.string() + ": cannot open for writing");
  }

  // Resume state is broadcast implicitly: every replica loaded the same checkpoint, and a
  // fresh run broadcasts replica 0's initialisation.
  if (options.resume.empty()) hooks.on_start(net);
  // Synchronised batch norm sums its statistics through the hooks (identity for one process,
  // so one process runs the very same arithmetic); detached again however training ends.
  struct SyncGuard {
    UNet& net;
    ~SyncGuard() { net->synchronise_batch_norm({}); }
  } sync_guard{net};
  if (options.sync_batch_norm) net->synchronise_batch_norm([&hooks](torch::Tensor& t) { hooks.sum(t); });
  net->train();
  if (options.channels_last) net->use_channels_last();

  // Batches are planned on this thread (one random stream) `prefetch` micro-batches ahead
  // and read on the loader's thread. The sampler state saved with a checkpoint is the one
  // before the first batch not yet consumed.
  detail::BatchLoader loader(sampler);
  std::deque<std::string> planned_states;
  int64_t planned = (first_step - 1) * options.accumulate;  // micro-batches planned so far
  const int64_t total_micro = options.steps * options.accumulate;
  auto plan_more = [&] {
    while (planned < total_micro && int64_t(planned_states.size()) < options.prefetch) {
      const int64_t epoch = planned / options.accumulate / options.steps_per_epoch;
      planned_states.push_back(sampler.rng_state());
      loader.submit(sampler.plan(options.tile_at_epoch(epoch)));
      ++planned;
    }
  };
  plan_more();

  ProgressBar bar("train", options.steps - first_step + 1, "steps", options.progress && writer);
  const auto start = std::chrono::steady_clock::now();
  std::vector<double> losses;
  TrainReport report;
  report.best_validation = state.best;
  int64_t tiles_done = 0, pixels_done = 0;
  int64_t step = first_step;
  for (; step <= options.steps; ++step) {
    const int64_t epoch = (step - 1) / options.steps_per_epoch;
    const double lr = learning_rate_at(opt, step, options.steps);
    set_learning_rate(*optimizer, lr);
    optimizer->zero_grad();
    fault_point(FaultPoint::kStep, step);  // test hooks: TESSERA_TEST_HANG / _THROW
    double step_loss = 0;
    bool labelled = false;
    for (int micro = 0; micro < options.accumulate; ++micro) {
      Sample s = loader.take();
      if (fault_nan_at_step(step)) s.input.fill_(std::numeric_limits<float>::quiet_NaN());  // TESSERA_TEST_NAN
      planned_states.pop_front();
      plan_more();
      tiles_done += s.target.size(0) * replicas;
      pixels_done += s.target.numel() * replicas;
      // Pipeline hooks run forward and backward across their stages; otherwise here.
      std::optional<HookedStep> hooked =
          hooks.forward_backward(net, s.input, s.target, options.loss, 1.0 / double(options.accumulate));
      StepLoss loss;
      if (hooked) {
        loss.value = hooked->loss;
        loss.labelled = hooked->labelled;
      } else {
        loss = global_batch_loss(net->forward(s.input), s.target, options.loss, hooks);
      }
      if (loss.labelled <= 0) continue;  // a batch without one labelled pixel teaches nothing
      if (!std::isfinite(loss.value))
        throw Error("step " + std::to_string(step) + ": loss is " + non_finite_name(loss.value) + " (learning rate " +
                    std::to_string(lr) + " too high, or NaN in the input?)" + kept_checkpoint_note(last));
      if (!hooked) (loss.for_backward / double(options.accumulate)).backward();
      step_loss += loss.value / options.accumulate;
      labelled = true;
    }
    double value = std::numeric_limits<double>::quiet_NaN();
    double grad_norm = 0;
    if (labelled) {
      value = step_loss;
      hooks.on_gradients(net);
      if (options.grad_clip > 0) grad_norm = torch::nn::utils::clip_grad_norm_(net->parameters(), options.grad_clip);
      optimizer->step();
      losses.push_back(value);
    }
    hooks.on_step(step, value);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double tiles_per_s = double(tiles_done) / elapsed;
    nlohmann::json j{{"step", step},
                     {"epoch", epoch},
                     {"loss", labelled ? nlohmann::json(value) : nlohmann::json(nullptr)},
                     {"lr", lr},
                     {"global_batch", global_batch},
                     {"tile", options.tile_at_epoch(epoch)},
                     {"tiles_per_s", tiles_per_s},
                     {"pixels_per_s", double(pixels_done) / elapsed},
                     {"elapsed_s", elapsed}};
    if (options.grad_clip > 0) j["grad_norm"] = grad_norm;
    if (writer) {
      metrics << j.dump() << '\n';
      metrics.flush();
    }
    char extra[96];
    std::snprintf(extra, sizeof extra, "loss %.4f  %.1f tiles/s", value, tiles_per_s);
    bar.update(step - first_step + 1, extra);

    // End of an epoch: validate, keep the best, maybe stop.
    const bool epoch_end = step % options.steps_per_epoch == 0 || step == options.steps;
    bool improved = false, stop = false;
    if (epoch_end && !validation.empty()) {
      torch::Tensor confusion = detail::validation_confusion(net, validation, meta.norm,
                                                             std::max<int64_t>(options.tile_at_epoch(epoch), 2 * options.tile),
                                                             hooks.replica(), replicas);
      if (!options.channels_last) net->use_contiguous();  // inference switched it to channels-last
      net->train();
      hooks.sum(confusion);
      const std::vector<double> dice = detail::dice_from_confusion(confusion);
      const double mean = mean_dice(dice, options.loss.include_background);
      improved = mean > state.best;
      if (improved) {
        state.best = mean;
        state.bad_epochs = 0;
      } else {
        ++state.bad_epochs;
      }
      stop = options.early_stopping > 0 && state.bad_epochs >= options.early_stopping;
      report.best_validation = state.best;
      if (writer) {
        nlohmann::json v{{"step", step}, {"epoch", epoch}, {"val_mean_dice", mean}, {"best", state.best}};
        for (auto& d : dice) v["val_dice"].push_back(std::isfinite(d) ? nlohmann::json(d) : nlohmann::json(nullptr));
        metrics << v.dump() << '\n';
        metrics.flush();
      }
    }
    if (writer && (step % options.checkpoint_every == 0 || step == options.steps || improved || stop)) {
      meta.step = step;
      meta.epoch = epoch;
      state.rng = planned_states.empty() ? sampler.rng_state() : planned_states.front();
      meta.trainer_state = state.to_json();
      require_finite_weights(net, step, last);  // a diverged model never replaces a good checkpoint
      save_checkpoint(last, net, meta, optimizer.get());
      if (options.keep_last > 1) {
        // Copied under a temporary name and renamed: a crash never leaves a cut step file.
        const fs::path kept = run.step_checkpoint(step), partial = kept.string() + ".partial";
        fs::copy_file(last, partial, fs::copy_options::overwrite_existing);
        fs::rename(partial, kept);
        prune_step_checkpoints(run, options.keep_last);
      }
      if (improved) {
        save_checkpoint(best_path, net, meta, optimizer.get());
        report.best_checkpoint = best_path;
      }
    }
    if (stop) {
      report.stopped_early = true;
      ++step;
      break;
    }
  }
  bar.finish();

  report.steps = step - first_step;
  report.last_step = step - 1;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t tail = std::max<size_t>(1, losses.size() / 10);
  for (size_t i = losses.size() - std::min(tail, losses.size()); i < losses.size(); ++i) report.final_loss += losses[i];
  report.final_loss /= double(std::min(tail, std::max<size_t>(losses.size(), 1)));
  report.tiles_per_second = double(tiles_done) / report.seconds;
  report.checkpoint = last;
  return report;
}

}  // namespace tessera
