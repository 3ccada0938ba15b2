#include "tessera/core/dsn_training.hpp"

#include <cmath>
#include <numeric>
#include <optional>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tessera/core/dsn_losses.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/model_json.hpp"
#include "train_model.hpp"

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

// The DSN and its loss terms for the one trainer (train_model.hpp).
class DsnModel : public detail::TrainModel {
 public:
  DsnModel(Dsn& dsn, DomainPlacement* placement)
      : dsn_(dsn),
        placement_(placement),
        total_(dsn->options().domains),
        local_(placement ? placement->domains(total_) : all_domains(total_)) {
    if (local_ != dsn->parts->owned())
      throw Error("DSN: this process trains other domains than its private encoders were built for (a bug)");
  }
  UNet& unet() override { return dsn_->unet; }
  torch::nn::Module& module() override { return *dsn_; }
  std::vector<int> domains() const override { return local_; }
  int total_domains() const override { return total_; }
  TrainOptions stream_options(const TrainOptions& options, int d) const override {
    TrainOptions o = options;
    o.seed = options.seed + kDomainStream * uint64_t(d + 1);
    if (d != 0) o.foreground_fraction = 0;  // no labels to centre on
    return o;
  }
  void use_channels_last() override { dsn_->use_channels_last(); }
  detail::ModelLoss loss(std::vector<detail::Sample>& samples, const TrainOptions& o, TrainHooks& hooks, double share,
                         double progress) override;
  const torch::nn::Module* checkpoint_extra(TrainHooks& hooks) override;
  bool optimizer_covers_model() const override { return int(local_.size()) == total_; }
  double clip_gradients(double max_norm, TrainHooks& hooks) override;
  void resume_extra(const std::string& path, const CheckpointMeta& meta) override {
    DsnOptions saved;
    try {
      saved = dsn_options_from_extra_model(meta.extra_model);
    } catch (const Error& e) {
      throw Error(path + ": " + e.what() + "; cannot resume a DSN from it");
    }
    if (!(saved == dsn_->options())) throw Error(path + ": checkpoint DSN differs from the configured one; cannot resume");
    load_checkpoint_extra(path, *dsn_->parts);
  }

 private:
  torch::Tensor task_loss(const DsnOutputs& out, const detail::Sample& s, const TrainOptions& o, TrainHooks& hooks,
                          torch::Tensor& reported);
  torch::Tensor dann_loss(const DsnOutputs& out, int domain, double global_batch, double lambda);
  torch::Tensor gathered_mmd(const std::vector<torch::Tensor>& pooled, const TrainOptions& o, TrainHooks& hooks);

  // Over every process: the placement's sum, or without one the hooks' (all domains here).
  void sum_all(torch::Tensor& t, TrainHooks& hooks) { placement_ ? placement_->sum_all(t) : hooks.sum(t); }

  Dsn& dsn_;
  DomainPlacement* placement_;
  const int total_;
  const std::vector<int> local_;
  std::optional<DsnParts> all_;  // the writer's copy of every private encoder (several domain groups)
};

// The source's task loss from its statistics summed over its replicas (trainer's global batch).
torch::Tensor DsnModel::task_loss(const DsnOutputs& out, const detail::Sample& s, const TrainOptions& o,
                                  TrainHooks& hooks, torch::Tensor& reported) {
  const detail::ModelLoss task = detail::global_batch_loss(out.logits, s.target, o.loss, hooks);
  if (task.labelled <= 0) return torch::zeros({}, torch::kFloat);  // no labelled pixel: nothing to learn
  if (hooks.replica() == 0) reported[0] += task.value;
  return task.for_backward;
}

// Every position of every level classified; the mean over the positions of all domains'
// global batches, then over the levels.
torch::Tensor DsnModel::dann_loss(const DsnOutputs& out, int domain, double global_batch, double lambda) {
  std::vector<torch::Tensor> reversed;
  for (const auto& level : out.levels) reversed.push_back(gradient_reversal(level, lambda));
  const std::vector<torch::Tensor> logits = dsn_->parts->classifier->forward(reversed);
  torch::Tensor dann = torch::zeros({}, torch::kFloat);
  for (const torch::Tensor& l : logits) {
    const int64_t positions = l.numel() / (l.size(0) * l.size(1));
    std::vector<int64_t> label_shape{l.size(0)};
    for (int64_t a = 2; a < l.dim(); ++a) label_shape.push_back(l.size(a));
    const torch::Tensor labels = torch::full(label_shape, int64_t{domain}, torch::kInt64);
    dann = dann + torch::nn::functional::cross_entropy(
                      l, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) /
                      (global_batch * total_ * double(positions) * double(logits.size()));
  }
  return dann;
}

detail::ModelLoss DsnModel::loss(std::vector<detail::Sample>& samples, const TrainOptions& options, TrainHooks& hooks,
                                 double /*share*/, double progress) {
  const DsnOptions& o = dsn_->options();
  const double global_batch = double(options.batch) * hooks.replicas();
  const double lambda = dann_lambda(progress);
  torch::Tensor reported = torch::zeros({4}, torch::kDouble);  // task, recon, difference, similarity
  torch::Tensor total = torch::zeros({}, torch::kFloat);
  std::vector<torch::Tensor> pooled(static_cast<size_t>(total_));
  for (size_t k = 0; k < local_.size(); ++k) {
    const int d = local_[k];
    const detail::Sample& s = samples[k];
    const DsnOutputs out = dsn_->forward(s.input, d, /*task=*/d == 0);
    if (d == 0) total = total + task_loss(out, s, options, hooks, reported);
    const torch::Tensor recon = simse_per_sample(s.input, out.reconstruction).sum() / global_batch;
    total = total + o.alpha * recon;
    reported[1] += recon.item<double>();
    const torch::Tensor g_local = difference_statistics(out.shared_code, out.private_code);
    torch::Tensor g_global = g_local.detach().contiguous().clone();
    hooks.sum(g_global);
    const double rows = global_batch * double(out.shared_code.numel() / (out.shared_code.size(0) * out.shared_code.size(1)));
    const torch::Tensor difference = difference_loss(g_local + (g_global - g_local.detach()), rows);
    total = total + o.beta * difference;
    if (hooks.replica() == 0) reported[2] += difference.item<double>();
    if (o.similarity == Similarity::kDann) {
      const torch::Tensor dann = dann_loss(out, d, global_batch, lambda);
      total = total + o.gamma * dann;
      reported[3] += dann.item<double>();
    } else {
      pooled[size_t(d)] = out.pooled;
    }
  }
  if (o.similarity == Similarity::kMmd) {
    const torch::Tensor mmd = gathered_mmd(pooled, options, hooks);
    total = total + o.gamma * mmd;
    if (hooks.writes_outputs()) reported[3] += mmd.item<double>();
  }
  sum_all(reported, hooks);
  const double task = reported[0].item<double>(), recon = reported[1].item<double>(),
               difference = reported[2].item<double>(), similarity = reported[3].item<double>();
  detail::ModelLoss out;
  out.for_backward = total;
  out.value = task + o.alpha * recon + o.beta * difference + o.gamma * similarity;
  out.labelled = 1;  // every step teaches the DSN (reconstruction, difference, similarity)
  out.terms = {{"task", task}, {"reconstruction", recon}, {"difference", difference}, {"similarity", similarity}};
  return out;
}

// Σ over targets of MMD²(source, target) on every domain's pooled codes: each process fills
// its rows of a D × B × C buffer, the sum over processes holds them all; its own rows keep
// their graph.
torch::Tensor DsnModel::gathered_mmd(const std::vector<torch::Tensor>& pooled, const TrainOptions& o,
                                     TrainHooks& hooks) {
  const int64_t b = o.batch, replicas = hooks.replicas(), first = b * hooks.replica();
  const int64_t channels = dsn_pooled_channels(dsn_->unet->options());
  torch::Tensor all = torch::zeros({total_, b * replicas, channels}, torch::kFloat);
  for (int d : local_) all[d].narrow(0, first, b).copy_(pooled[size_t(d)].detach());
  sum_all(all, hooks);
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

// With every domain here, as any model. Otherwise collective: the shared gradients are
// already sums (equal on every process), each private encoder's squared norm counts once
// (its domain's first replica), so the global norm is the one process's.
double DsnModel::clip_gradients(double max_norm, TrainHooks& hooks) {
  if (int(local_.size()) == total_) return TrainModel::clip_gradients(max_norm, hooks);
  torch::NoGradGuard no_grad;
  const auto squared = [](const std::vector<torch::Tensor>& ps) {
    double s = 0;
    for (const auto& p : ps)
      if (p.grad().defined()) s += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
    return s;
  };
  double privates = 0;
  if (hooks.replica() == 0)
    for (int d : local_) privates += squared(dsn_->parts->private_parameters(d));
  torch::Tensor sum = torch::tensor({privates}, torch::kDouble);
  sum_all(sum, hooks);
  const double norm = std::sqrt(squared(dsn_->shared_parameters()) + sum.item<double>());
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1)
    for (auto& p : dsn_->parameters())
      if (p.grad().defined()) p.grad().mul_(coefficient);
  return norm;
}

// Collective. With every domain here, the parts themselves; otherwise each private encoder
// comes from its domain's first replica: every process fills its rows of a D × n buffer, the
// sum over every process holds them all (exact: the other rows are zeros), the writer keeps them.
const torch::nn::Module* DsnModel::checkpoint_extra(TrainHooks& hooks) {
  if (int(local_.size()) == total_) return dsn_->parts.get();
  torch::NoGradGuard no_grad;
  const UNetOptions& unet = dsn_->unet->options();
  int64_t n = 0;  // every domain's private encoder has one shape
  for (auto& p : dsn_->parts->private_parameters(local_.front())) n += p.numel();
  torch::Tensor rows = torch::zeros({total_, n}, torch::kFloat);
  if (hooks.replica() == 0)
    for (int d : local_) {
      std::vector<torch::Tensor> flat;
      for (auto& p : dsn_->parts->private_parameters(d)) flat.push_back(p.detach().reshape({-1}).to(torch::kFloat));
      rows[d].copy_(torch::cat(flat));
    }
  sum_all(rows, hooks);
  if (!hooks.writes_outputs()) return nullptr;
  if (!all_) all_ = DsnParts(unet, dsn_->options(), all_domains(total_), 0);
  copy_module(*dsn_->parts->recon, *(*all_)->recon);
  copy_module(*dsn_->parts->classifier, *(*all_)->classifier);
  for (int d = 0; d < total_; ++d) {
    int64_t at = 0;
    for (auto& p : (*all_)->private_parameters(d)) {
      p.copy_(rows[d].narrow(0, at, p.numel()).view(p.sizes()));
      at += p.numel();
    }
  }
  return all_->get();
}

}  // namespace

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

TrainReport train(Dsn& dsn, const std::vector<std::vector<TrainingPair>>& domains, const TrainOptions& options,
                  CheckpointMeta meta, TrainHooks* hooks, DomainPlacement* placement,
                  const std::vector<TrainingPair>& validation, TrainObserver* observer) {
  check_dsn_training(dsn->unet->options(), dsn->options(), domains, options);
  for (const TrainingPair& p : validation)
    if (!p.labels || p.image->info().extent != p.labels->info().extent)
      throw Error(p.image->info().path + ": a validation image needs labels of its size");
  DsnModel model(dsn, placement);
  meta.extra_model = dsn_extra_model(dsn->options());
  return detail::run_training(model, domains, options, std::move(meta), hooks, validation, observer);
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
