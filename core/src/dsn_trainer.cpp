#include "tessera/core/dsn_trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tessera/core/dsn_losses.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/core/optim.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/run/run_layout.hpp"
#include "tile_sampler.hpp"

namespace tessera {
namespace {

constexpr uint64_t kDomainStream = 7919;  // domain d's tiles: seed + kDomainStream · (d + 1)

void copy_module(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  const auto src = from.named_parameters();
  for (auto& p : to.named_parameters()) p.value().copy_(src[p.key()]);
  const auto sb = from.named_buffers();
  for (auto& b : to.named_buffers()) b.value().copy_(sb[b.key()]);
}

std::vector<int> all_domains(int total) {
  std::vector<int> d(static_cast<size_t>(total));
  std::iota(d.begin(), d.end(), 0);
  return d;
}

}  // namespace

void check_dsn_training(const UNetOptions& unet, const DsnOptions& dsn,
                        const std::vector<std::vector<TrainingPair>>& domains, const TrainOptions& o) {
  unet.validate();
  dsn.validate(unet);
  o.validate(unet);
  if (int(domains.size()) != dsn.domains)
    throw Error("DSN of " + std::to_string(dsn.domains) + " domains given data for " + std::to_string(domains.size()));
  if (o.accumulate != 1) throw Error("train.accumulate: a DSN step takes one batch per domain (use 1)");
  if (o.grad_clip > 0) throw Error("train.grad_clip: not supported for a DSN yet (use 0)");
  if (!o.resume.empty()) throw Error("--resume: a DSN run cannot resume yet (its checkpoints hold no optimiser state)");
  for (size_t d = 0; d < domains.size(); ++d) {
    const std::string name = d == 0 ? "source" : "target " + std::to_string(d);
    if (domains[d].empty()) throw Error("DSN " + name + " domain has no images");
    for (const TrainingPair& p : domains[d]) {
      if (d == 0 && !p.labels) throw Error(p.image->info().path + ": the source domain needs labels");
      if (p.image->info().channels != unet.in_channels)
        throw Error(p.image->info().path + ": has " + std::to_string(p.image->info().channels) +
                    " channels but the model expects " + std::to_string(unet.in_channels) +
                    " (every domain's images need the source's bands)");
      if (int(p.image->info().extent.size()) != unet.dims)
        throw Error(p.image->info().path + ": is " + std::to_string(p.image->info().extent.size()) +
                    "-D but the model is " + std::to_string(unet.dims) + "-D");
    }
  }
}

namespace {

std::string non_finite(double v) { return std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf"; }

// This process's terms of one step: the loss to backward (its share) and its contributions
// to the reported values (each counted once over all processes).
struct StepTerms {
  torch::Tensor for_backward;
  torch::Tensor reported = torch::zeros({4}, torch::kDouble);  // task, recon, difference, similarity
  int64_t tiles = 0, pixels = 0;
};

class DsnTraining {
 public:
  DsnTraining(Dsn& dsn, const std::vector<std::vector<TrainingPair>>& domains, const TrainOptions& options,
              CheckpointMeta meta, DsnHooks& hooks, TrainObserver* observer)
      : dsn_(dsn),
        options_(options),
        meta_(std::move(meta)),
        hooks_(hooks),
        observer_(hooks.writes_outputs() ? observer : nullptr),
        writer_(hooks.writes_outputs()),
        total_(dsn->options().domains),
        local_(hooks.domains(total_)),
        last_(RunLayout(options.run_dir).last_checkpoint()) {
    if (local_ != dsn->parts->owned())
      throw Error("DSN: this process trains other domains than its private encoders were built for (a bug)");
    for (int d : local_) {
      TrainOptions o = options;
      o.seed = options.seed + kDomainStream * uint64_t(d + 1);
      if (d != 0) o.foreground_fraction = 0;  // no labels to centre on
      samplers_.push_back(std::make_unique<detail::TileSampler>(domains[size_t(d)], dsn->unet->options(), o, meta_.norm,
                                                                hooks.replica(), hooks.replicas()));
    }
    for (auto& s : samplers_) loaders_.push_back(std::make_unique<detail::BatchLoader>(*s));
    optimizer_ = make_optimizer(dsn->parameters(), options.optimizer);
    meta_.extra_model = dsn_extra_model(dsn->options());
  }

  void begin() {
    if (observer_) observer_->on_begin(std::nullopt);
    hooks_.on_start(*dsn_);
    if (options_.channels_last) dsn_->use_channels_last();
    dsn_->train();
    plan_more();
    bar_.emplace("train dsn", options_.steps, "steps", options_.progress && writer_);
    start_ = std::chrono::steady_clock::now();
  }

  void run_step(int64_t step) {
    const double lr = learning_rate_at(options_.optimizer, step, options_.steps);
    set_learning_rate(*optimizer_, lr);
    optimizer_->zero_grad();
    const StepTerms t = forward(step);
    torch::Tensor reported = t.reported.clone();
    hooks_.sum_all(reported);
    const DsnOptions& o = dsn_->options();
    const double task = reported[0].item<double>(), recon = reported[1].item<double>(),
                 difference = reported[2].item<double>(), similarity = reported[3].item<double>();
    const double loss = task + o.alpha * recon + o.beta * difference + o.gamma * similarity;
    if (!std::isfinite(loss))
      throw Error("step " + std::to_string(step) + ": DSN loss is " + non_finite(loss) + " (task " + std::to_string(task) +
                  ", reconstruction " + std::to_string(recon) + ", difference " + std::to_string(difference) +
                  ", similarity " + std::to_string(similarity) + "; learning rate " + std::to_string(lr) +
                  " too high, or NaN in an input?)");
    t.for_backward.backward();
    hooks_.on_gradients(*dsn_);
    optimizer_->step();
    hooks_.on_step(step, loss);
    losses_.push_back(loss);
    tiles_ += t.tiles;
    pixels_ += t.pixels;
    report(step, lr, loss, {{"task", task}, {"reconstruction", recon}, {"difference", difference}, {"similarity", similarity}});
  }

  void save_checkpoint(int64_t step) {
    if (!(step % options_.checkpoint_every == 0 || step == options_.steps)) return;
    // Every process takes part in gathering the private encoders; one writes.
    DsnPartsImpl* parts = dsn_->parts.get();
    if (int(local_.size()) != total_) {
      if (writer_ && !all_) {
        all_ = DsnParts(dsn_->unet->options(), dsn_->options(), all_domains(total_), options_.seed);
      }
      if (writer_) {
        copy_module(*dsn_->parts->recon, *(*all_)->recon);
        copy_module(*dsn_->parts->classifier, *(*all_)->classifier);
      }
      hooks_.gather_private(*dsn_, writer_ ? **all_ : *dsn_->parts);
      if (writer_) parts = all_->get();
    }
    if (!writer_) return;
    {
      torch::NoGradGuard no_grad;
      for (const auto& p : dsn_->named_parameters())
        if (!torch::isfinite(p.value()).all().item<bool>())
          throw Error("step " + std::to_string(step) + ": weights became NaN or Inf (parameter " + p.key() +
                      "; learning rate too high?); the last good checkpoint is kept");
    }
    meta_.step = step;
    meta_.epoch = (step - 1) / options_.steps_per_epoch;
    if (!observer_) return;
    const std::string bytes = checkpoint_bytes(dsn_->unet, meta_, nullptr, parts);
    observer_->on_checkpoint({CheckpointKind::kLast, step, bytes});
    if (options_.keep_last > 1) observer_->on_checkpoint({CheckpointKind::kStep, step, bytes, options_.keep_last});
  }

  TrainReport finish() {
    bar_->finish();
    TrainReport r;
    r.steps = r.last_step = options_.steps;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const size_t tail = std::max<size_t>(1, losses_.size() / 10);
    for (size_t i = losses_.size() - std::min(tail, losses_.size()); i < losses_.size(); ++i) r.final_loss += losses_[i];
    r.final_loss /= double(std::min(tail, std::max<size_t>(losses_.size(), 1)));
    r.tiles_per_second = double(tiles_) / r.seconds;
    r.checkpoint = last_;
    return r;
  }

 private:
  // Plans `prefetch` batches ahead for every local domain (same tile side for all).
  void plan_more() {
    while (planned_ < options_.steps && planned_ < taken_ + options_.prefetch) {
      const int64_t tile = options_.tile_at_epoch(planned_ / options_.steps_per_epoch);
      for (size_t k = 0; k < samplers_.size(); ++k) loaders_[k]->submit(samplers_[k]->plan(tile));
      ++planned_;
    }
  }

  StepTerms forward(int64_t step) {
    const DsnOptions& o = dsn_->options();
    const int replicas = hooks_.replicas();
    const double global_batch = double(options_.batch) * replicas;
    const double lambda = dann_lambda(double(step - 1) / double(options_.steps));
    StepTerms t;
    torch::Tensor total = torch::zeros({}, torch::kFloat);
    std::vector<torch::Tensor> pooled(static_cast<size_t>(total_));
    for (size_t k = 0; k < local_.size(); ++k) {
      const int d = local_[k];
      detail::Sample s = loaders_[k]->take();
      t.tiles += s.input.size(0) * replicas;
      t.pixels += s.target.numel() * replicas;
      const DsnOutputs out = dsn_->forward(s.input, d, /*task=*/d == 0);
      if (d == 0) {
        // The source's task loss from statistics summed over its replicas (trainer.cpp).
        const torch::Tensor local = loss_statistics(out.logits, s.target, options_.loss);
        torch::Tensor global = local.detach().to(torch::kFloat).contiguous().clone();
        hooks_.sum_replicas(global);
        const torch::Tensor task =
            loss_from_statistics(local + (global.to(local.dtype()) - local.detach()), options_.loss, out.logits.size(1));
        total = total + task;
        if (hooks_.replica() == 0) t.reported[0] += task.item<double>();
      }
      const torch::Tensor recon = simse_per_sample(s.input, out.reconstruction).sum() / global_batch;
      total = total + o.alpha * recon;
      t.reported[1] += recon.item<double>();
      const torch::Tensor g_local = difference_statistics(out.shared_code, out.private_code);
      torch::Tensor g_global = g_local.detach().contiguous().clone();
      hooks_.sum_replicas(g_global);
      const double rows = global_batch * double(out.shared_code.numel() / (out.shared_code.size(0) * out.shared_code.size(1)));
      const torch::Tensor difference = difference_loss(g_local + (g_global - g_local.detach()), rows);
      total = total + o.beta * difference;
      if (hooks_.replica() == 0) t.reported[2] += difference.item<double>();
      if (o.similarity == Similarity::kDann) {
        // Every position of every level classified; the mean over the positions of all
        // domains' global batches, then over the levels.
        std::vector<torch::Tensor> reversed;
        for (const auto& level : out.levels) reversed.push_back(gradient_reversal(level, lambda));
        const std::vector<torch::Tensor> logits = dsn_->parts->classifier->forward(reversed);
        torch::Tensor dann = torch::zeros({}, torch::kFloat);
        for (const torch::Tensor& l : logits) {
          const int64_t positions = l.numel() / (l.size(0) * l.size(1));
          std::vector<int64_t> label_shape{l.size(0)};
          for (int64_t a = 2; a < l.dim(); ++a) label_shape.push_back(l.size(a));
          const torch::Tensor labels = torch::full(label_shape, int64_t{d}, torch::kInt64);
          dann = dann + torch::nn::functional::cross_entropy(
                            l, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) /
                            (global_batch * total_ * double(positions) * double(logits.size()));
        }
        total = total + o.gamma * dann;
        t.reported[3] += dann.item<double>();
      } else {
        pooled[size_t(d)] = out.pooled;
      }
    }
    if (o.similarity == Similarity::kMmd) {
      const torch::Tensor mmd = gathered_mmd(pooled);
      total = total + o.gamma * mmd;
      if (writer_) t.reported[3] += mmd.item<double>();
    }
    ++taken_;
    plan_more();
    t.for_backward = total;
    return t;
  }

  // Σ over targets of MMD²(source, target) on every domain's pooled codes: each process
  // fills its rows of a D × B × C buffer, the sum over processes holds them all; its own
  // rows keep their graph.
  torch::Tensor gathered_mmd(const std::vector<torch::Tensor>& pooled) {
    const int64_t b = options_.batch, replicas = hooks_.replicas(), first = b * hooks_.replica();
    const int64_t channels = dsn_pooled_channels(dsn_->unet->options());
    torch::Tensor all = torch::zeros({total_, b * replicas, channels}, torch::kFloat);
    for (int d : local_) all[d].narrow(0, first, b).copy_(pooled[size_t(d)].detach());
    hooks_.sum_all(all);
    std::vector<torch::Tensor> codes;
    for (int d = 0; d < total_; ++d) {
      const torch::Tensor& mine = pooled[size_t(d)];
      if (!mine.defined()) {
        codes.push_back(all[d]);
        continue;
      }
      const torch::Tensor others = all[d];
      codes.push_back(torch::cat({others.narrow(0, 0, first), mine, others.narrow(0, first + b, others.size(0) - first - b)}));
    }
    torch::Tensor sum = torch::zeros({}, torch::kFloat);
    for (int d = 1; d < total_; ++d) sum = sum + mmd2(codes[0], codes[size_t(d)], dsn_->options().mmd_sigmas);
    return sum;
  }

  void report(int64_t step, double lr, double loss, std::vector<std::pair<std::string, double>> terms) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    char extra[160];
    std::snprintf(extra, sizeof extra, "loss %.4f (task %.4f recon %.4f diff %.4f sim %.4f)", loss, terms[0].second,
                  terms[1].second, terms[2].second, terms[3].second);
    bar_->update(step, extra);
    if (!observer_) return;
    StepMetrics m;
    m.step = step;
    m.epoch = (step - 1) / options_.steps_per_epoch;
    m.loss = loss;
    m.lr = lr;
    m.global_batch = int64_t(options_.batch) * hooks_.replicas() * total_;
    m.tile = options_.tile_at_epoch(m.epoch);
    m.tiles_per_s = double(tiles_) / elapsed;
    m.pixels_per_s = double(pixels_) / elapsed;
    m.elapsed_s = elapsed;
    m.loss_terms = std::move(terms);
    observer_->on_step(m);
  }

  Dsn& dsn_;
  const TrainOptions& options_;
  CheckpointMeta meta_;
  DsnHooks& hooks_;
  TrainObserver* observer_;
  const bool writer_;
  const int total_;
  const std::vector<int> local_;
  const std::string last_;
  std::vector<std::unique_ptr<detail::TileSampler>> samplers_;
  std::vector<std::unique_ptr<detail::BatchLoader>> loaders_;  // after the samplers: joined first
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::optional<DsnParts> all_;  // the writer's copy of every private encoder (domain parallel)
  std::optional<ProgressBar> bar_;
  std::chrono::steady_clock::time_point start_;
  std::vector<double> losses_;
  int64_t planned_ = 0, taken_ = 0, tiles_ = 0, pixels_ = 0;
};

}  // namespace

std::vector<int> DsnHooks::domains(int total) const { return all_domains(total); }

void DsnHooks::gather_private(DsnImpl& dsn, DsnPartsImpl& all) {
  for (int d : dsn.parts->owned())
    if (&all != dsn.parts.get()) copy_module(*dsn.parts->private_encoder(d), *all.private_encoder(d));
}

std::string dsn_extra_model(const DsnOptions& dsn) {
  nlohmann::json options;
  options_to_json(options, dsn);
  return nlohmann::json{{"kind", "dsn"}, {"domains", dsn.domains}, {"options", options}}.dump();
}

DsnOptions dsn_options_from_extra_model(const std::string& text) {
  if (text.empty()) throw Error("not a DSN checkpoint (it holds a plain U-Net)");
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("kind") != "dsn") throw Error("not a DSN checkpoint (extra model kind " + j.at("kind").dump() + ")");
    DsnOptions o;
    options_from_json(j.at("options"), o);
    o.domains = j.at("domains").get<int>();
    return o;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("damaged DSN description (") + e.what() + ")");
  }
}

TrainReport train_dsn(Dsn& dsn, const std::vector<std::vector<TrainingPair>>& domains, const TrainOptions& options,
                      CheckpointMeta meta, DsnHooks* hooks_in, TrainObserver* observer) {
  check_dsn_training(dsn->unet->options(), dsn->options(), domains, options);
  DsnHooks one_process;
  DsnTraining run(dsn, domains, options, std::move(meta), hooks_in ? *hooks_in : one_process, observer);
  run.begin();
  for (int64_t step = 1; step <= options.steps; ++step) {
    run.run_step(step);
    run.save_checkpoint(step);
  }
  return run.finish();
}

LoadedDsn load_dsn_checkpoint(const std::string& path) {
  LoadedCheckpoint ck = load_checkpoint(path);
  DsnOptions o;
  try {
    o = dsn_options_from_extra_model(ck.meta.extra_model);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  LoadedDsn out;
  out.meta = ck.meta;
  out.dsn = Dsn(ck.meta.model, o, all_domains(o.domains), 0);
  copy_module(*ck.net, *out.dsn->unet);
  load_checkpoint_extra(path, *out.dsn->parts);
  return out;
}

}  // namespace tessera
