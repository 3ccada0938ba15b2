#include "tessera/core/dsn_training.hpp"

#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tessera/core/dsn_losses.hpp"
#include "tessera/core/decomposition.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/core/staged_work.hpp"
#include "dsn_checkpoint.hpp"
#include "train_model.hpp"

namespace tessera {
namespace {

constexpr uint64_t kDomainStream = 7919;  // domain d's tiles: seed + kDomainStream · (d + 1)

using detail::all_domains;
using detail::copy_module;

// check_dsn_resume on the checkpoint's description `text`.
void check_written_groups(const std::string& path, const std::string& text, int domain_groups) {
  int written = 1;
  try {
    dsn_options_from_extra_model(text);
    written = nlohmann::json::parse(text).value("domain_groups", 1);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what() + "; cannot resume a DSN from it");
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": damaged DSN description (" + e.what() + ")");
  }
  if (written != domain_groups)
    throw Error(path + ": checkpoint written by " + std::to_string(written) + " domain group(s), this run has " +
                std::to_string(domain_groups) + "; resume with as many domain groups (ranks / (--dp × --pp × --sp))");
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

// Under spatial parallelism: `local`, this block's part of a sum over the blocks of every
// tile, as the whole tiles' sum whose graph is this block's part (the others' enter as
// constants; the hooks sum the blocks' gradients). `local` itself without blocks.
torch::Tensor over_blocks(const torch::Tensor& local, const Decomposition* blocks) {
  if (blocks == nullptr) return local;
  const torch::Tensor mine = local.detach();
  return local + (blocks->image_sum(mine) - mine);
}

// How many elements of each tile's `per_sample` elements the blocks hold together.
double tile_elements(double per_sample, const Decomposition* blocks) {
  if (blocks == nullptr) return per_sample;
  return blocks->image_sum(torch::full({1}, per_sample, torch::kFloat64)).item<double>();
}

// simse per sample over the whole tiles: each sample's mean error over the blocks first (a
// constant for the gradient, since the variance's derivative in the mean is 0), then the sum
// of squared deviations. simse_per_sample itself without blocks.
torch::Tensor tile_simse(const torch::Tensor& x, const torch::Tensor& reconstruction, const Decomposition* blocks) {
  if (blocks == nullptr) return simse_per_sample(x, reconstruction);
  const int64_t n = x.size(0);
  const torch::Tensor d = (x - reconstruction).reshape({n, -1});
  const double k = tile_elements(double(d.size(1)), blocks);
  const torch::Tensor mean = blocks->image_sum(d.detach().sum(1).contiguous()) / k;
  return over_blocks((d - mean.unsqueeze(1)).square().sum(1), blocks) / k;
}

class DsnStages;

// The DSN and its loss terms for the one trainer (train_model.hpp).
class DsnModel : public detail::TrainModel {
 public:
  // Collective (counts the domain groups).
  DsnModel(Dsn& dsn, TrainHooks& hooks)
      : dsn_(dsn), total_(dsn->options().domains), local_(hooks.domains(total_)), groups_(count_groups(hooks)) {
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
  int groups() const { return groups_; }
  detail::ModelLoss loss(std::vector<detail::Sample>& samples, const TrainOptions& o, TrainHooks& hooks, double share,
                         double progress) override;
  double clip_gradients(double max_norm, TrainHooks& hooks) override;
  // With every domain here, the parts and the optimiser themselves; otherwise the writer's
  // copy gathered from every domain group (dsn_checkpoint.hpp).
  CheckpointParts checkpoint_parts(torch::optim::Optimizer& optimizer, const OptimizerOptions& options,
                                   TrainHooks& hooks) override {
    if (int(local_.size()) == total_) return {dsn_->parts.get(), &optimizer};
    if (!gathered_.gather(*dsn_, local_, optimizer, options, hooks)) return {};
    return {gathered_.parts(), gathered_.optimizer()};
  }
  std::vector<std::string> stream_states(std::vector<std::string> mine, TrainHooks& hooks) override {
    if (int(local_.size()) == total_) return mine;
    return detail::gather_domain_strings(mine, local_, total_, hooks);
  }
  void resume_extra(const std::string& path, const CheckpointMeta& meta, torch::optim::Optimizer& optimizer,
                    const OptimizerOptions& options) override {
    DsnOptions saved;
    try {
      saved = dsn_options_from_extra_model(meta.extra_model);
    } catch (const Error& e) {
      throw Error(path + ": " + e.what() + "; cannot resume a DSN from it");
    }
    if (!(saved == dsn_->options())) throw Error(path + ": checkpoint DSN differs from the configured one; cannot resume");
    check_written_groups(path, meta.extra_model, groups_);
    detail::restore_dsn_parts(path, *dsn_, optimizer, options);
  }

 private:
  friend class DsnStages;
  // What one domain's batch adds to the step's loss (its terms into `reported`): the forward,
  // then domain_terms on its outputs (`input`: this process's block of the batch).
  torch::Tensor domain_loss(const detail::Sample& s, int domain, const TrainOptions& o, TrainHooks& hooks,
                            double lambda, torch::Tensor& reported, std::vector<torch::Tensor>& pooled);
  torch::Tensor domain_terms(const DsnOutputs& out, const torch::Tensor& input, const detail::Sample& s, int domain,
                             const TrainOptions& o, TrainHooks& hooks, double lambda, torch::Tensor& reported,
                             std::vector<torch::Tensor>& pooled);
  torch::Tensor dann_loss(const DsnOutputs& out, int domain, double global_batch, double lambda,
                          const Decomposition* blocks);
  torch::Tensor gathered_mmd(const std::vector<torch::Tensor>& pooled, const TrainOptions& o, TrainHooks& hooks);

  // Each group's first replica counts once in a sum over the replicas and groups.
  static int count_groups(TrainHooks& hooks) {
    torch::Tensor leaders = torch::full({1}, hooks.replica() == 0 ? 1.0 : 0.0, torch::kDouble);
    hooks.sum_domains(leaders);
    return int(std::lround(leaders.item<double>()));
  }

  Dsn& dsn_;
  const int total_;
  const std::vector<int> local_;
  const int groups_;
  detail::GatheredDsn gathered_;  // the writer's copy of every domain group's part (several groups)
};

// Every position of every level classified; the mean over the positions of all domains'
// global batches (whole tiles), then over the levels. This block's part of it.
torch::Tensor DsnModel::dann_loss(const DsnOutputs& out, int domain, double global_batch, double lambda,
                                  const Decomposition* blocks) {
  std::vector<torch::Tensor> reversed;
  for (const auto& level : out.levels) reversed.push_back(gradient_reversal(level, lambda));
  const std::vector<torch::Tensor> logits = dsn_->parts->classifier->forward(reversed);
  torch::Tensor dann = torch::zeros({}, torch::kFloat);
  for (const torch::Tensor& l : logits) {
    const double positions = tile_elements(double(l.numel() / (l.size(0) * l.size(1))), blocks);
    std::vector<int64_t> label_shape{l.size(0)};
    for (int64_t a = 2; a < l.dim(); ++a) label_shape.push_back(l.size(a));
    const torch::Tensor labels = torch::full(label_shape, int64_t{domain}, torch::kInt64);
    dann = dann + torch::nn::functional::cross_entropy(
                      l, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) /
                      (global_batch * total_ * positions * double(logits.size()));
  }
  return dann;
}

torch::Tensor DsnModel::domain_loss(const detail::Sample& s, int d, const TrainOptions& options, TrainHooks& hooks,
                                    double lambda, torch::Tensor& reported, std::vector<torch::Tensor>& pooled) {
  const Decomposition* blocks = hooks.tile_decomposition();
  // Tiles are float; a float64 DSN (the exactness tests') takes them in float64.
  const torch::Tensor input = hooks.block(s.input, 2, unet_alignment(dsn_->unet->options()))
                                  .to(dsn_->unet->parameters().front().scalar_type());
  DsnOutputs out;
  {
    std::optional<DecompositionScope> scope;
    if (blocks) scope.emplace(*blocks);
    out = dsn_->forward(input, d, /*task=*/d == 0);
  }
  return domain_terms(out, input, s, d, options, hooks, lambda, reported, pooled);
}

torch::Tensor DsnModel::domain_terms(const DsnOutputs& out, const torch::Tensor& input, const detail::Sample& s, int d,
                                     const TrainOptions& options, TrainHooks& hooks, double lambda,
                                     torch::Tensor& reported, std::vector<torch::Tensor>& pooled) {
  const DsnOptions& o = dsn_->options();
  const double global_batch = double(options.batch) * hooks.replicas();
  const Decomposition* blocks = hooks.tile_decomposition();
  const int64_t alignment = unet_alignment(dsn_->unet->options());
  torch::Tensor total = torch::zeros({}, torch::kFloat);
  if (d == 0) {  // the source's task loss over its global batch
    const detail::ModelLoss task =
        detail::global_batch_loss(out.logits, hooks.block(s.target, 1, alignment), options.loss, hooks, blocks);
    if (task.labelled > 0) total = total + task.for_backward;  // else no labelled pixel: nothing to learn
    if (task.labelled > 0 && hooks.replica() == 0) reported[0] += task.value;
  }
  const torch::Tensor recon = tile_simse(input, out.reconstruction, blocks).sum() / global_batch;
  total = total + o.alpha * recon;
  reported[1] += recon.item<double>();
  const torch::Tensor g_local = over_blocks(difference_statistics(out.shared_code, out.private_code), blocks);
  torch::Tensor g_global = g_local.detach().contiguous().clone();
  hooks.sum(g_global);
  const double rows =
      global_batch * tile_elements(double(out.shared_code.numel() / (out.shared_code.size(0) * out.shared_code.size(1))), blocks);
  const torch::Tensor difference = difference_loss(g_local + (g_global - g_local.detach()), rows);
  total = total + o.beta * difference;
  if (hooks.replica() == 0) reported[2] += difference.item<double>();
  if (o.similarity == Similarity::kDann) {
    const torch::Tensor dann = dann_loss(out, d, global_batch, lambda, blocks);
    total = total + o.gamma * dann;
    reported[3] += over_blocks(dann.detach(), blocks).item<double>();
  } else {
    pooled[size_t(d)] = out.pooled;
  }
  return total;
}

// The DSN as a chain for pipeline stages (staged_work.hpp): layer ℓ < L is encoder level ℓ of
// the shared and the domain's private encoder, layer L the heads and every loss term. The
// micro-batches are the domains this process trains, each its whole batch (the difference
// loss is a function of a domain's whole batch, so it does not split further). A boundary
// carries the shared code, the private code, the skip indices (as floats) and the skips.
class DsnStages final : public StagedWork {
 public:
  DsnStages(DsnModel& model, std::vector<detail::Sample>& samples, const TrainOptions& options, TrainHooks& hooks,
            double lambda, double share, torch::Tensor& reported)
      : model_(model), samples_(samples), options_(options), hooks_(hooks), lambda_(lambda), share_(share),
        reported_(reported) {}
  int layers() const override { return model_.dsn_->unet->options().levels + 1; }
  int micro_batches() const override { return int(model_.local_.size()); }
  torch::Tensor& report() override { return reported_; }

  TensorBundle forward(int m, int first, int last, TensorBundle in) override {
    Dsn& dsn = model_.dsn_;
    std::optional<DecompositionScope> scope;
    if (const Decomposition* blocks = hooks_.tile_decomposition()) scope.emplace(*blocks);
    DsnCodes codes = first == 0 ? dsn->start(input(m)) : unpack(std::move(in));
    dsn->encode_levels(first, last, codes, model_.local_[size_t(m)]);
    return pack(std::move(codes));
  }

  torch::Tensor finish(int m, TensorBundle in, bool report) override {
    const int d = model_.local_[size_t(m)];
    DsnOutputs out;
    {
      std::optional<DecompositionScope> scope;
      if (const Decomposition* blocks = hooks_.tile_decomposition()) scope.emplace(*blocks);
      out = model_.dsn_->heads(unpack(std::move(in)), /*task=*/d == 0);
    }
    torch::Tensor scratch = torch::zeros_like(reported_);
    std::vector<torch::Tensor> pooled(size_t(model_.total_));  // DANN only: no MMD codes
    return share_ * model_.domain_terms(out, input(m), samples_[size_t(m)], d, options_, hooks_, lambda_,
                                        report ? reported_ : scratch, pooled);
  }

 private:
  torch::Tensor input(int m) const {
    return hooks_.block(samples_[size_t(m)].input, 2, unet_alignment(model_.dsn_->unet->options()));
  }
  static TensorBundle pack(DsnCodes codes) {
    TensorBundle b{codes.shared, codes.private_code};
    std::vector<float> keys;
    for (const auto& [e, t] : codes.skips) keys.push_back(float(e));
    b.push_back(torch::tensor(keys, torch::kFloat));
    for (auto& [e, t] : codes.skips) b.push_back(t);
    return b;
  }
  static DsnCodes unpack(TensorBundle b) {
    TESSERA_CHECK(b.size() >= 3 && b.size() == 3 + size_t(b[2].numel()));
    DsnCodes codes{b[0], b[1], {}};
    for (int64_t i = 0; i < b[2].numel(); ++i) codes.skips[int(b[2][i].item<float>())] = b[3 + size_t(i)];
    return codes;
  }

  DsnModel& model_;
  std::vector<detail::Sample>& samples_;
  const TrainOptions& options_;
  TrainHooks& hooks_;
  const double lambda_, share_;
  torch::Tensor& reported_;
};

detail::ModelLoss DsnModel::loss(std::vector<detail::Sample>& samples, const TrainOptions& options, TrainHooks& hooks,
                                 double share, double progress) {
  const DsnOptions& o = dsn_->options();
  const double lambda = dann_lambda(progress);
  torch::Tensor reported = torch::zeros({4}, torch::kDouble);  // task, recon, difference, similarity
  detail::ModelLoss out;
  auto* staged = dynamic_cast<StagedHooks*>(&hooks);
  if (staged && staged->stages() > 1) {  // the hooks run forward and backward through the stages
    if (o.similarity == Similarity::kMmd)
      throw Error("model.dsn.similarity: mmd compares every domain's whole batch at once, so no micro-batch's "
                  "backward may start before every domain's forward, which a pipeline schedule does not wait "
                  "for; use dann with pipeline stages");
    DsnStages work(*this, samples, options, hooks, lambda, share, reported);
    staged->run_stages(work);
  } else {
    torch::Tensor total = torch::zeros({}, torch::kFloat);
    std::vector<torch::Tensor> pooled(static_cast<size_t>(total_));
    for (size_t k = 0; k < local_.size(); ++k)
      total = total + domain_loss(samples[k], local_[k], options, hooks, lambda, reported, pooled);
    if (o.similarity == Similarity::kMmd) {
      const torch::Tensor mmd = gathered_mmd(pooled, options, hooks);
      total = total + o.gamma * mmd;
      if (hooks.replica() == 0 && local_.front() == 0) reported[3] += mmd.item<double>();  // once per sum_domains
    }
    out.for_backward = total;
  }
  hooks.sum_domains(reported);
  const double task = reported[0].item<double>(), recon = reported[1].item<double>(),
               difference = reported[2].item<double>(), similarity = reported[3].item<double>();
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
  hooks.sum_domains(all);
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
  hooks.sum_domains(sum);
  const double norm = std::sqrt(squared(dsn_->shared_parameters()) + sum.item<double>());
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1)
    for (auto& p : dsn_->parameters())
      if (p.grad().defined()) p.grad().mul_(coefficient);
  return norm;
}

}  // namespace

std::string dsn_extra_model(const DsnOptions& dsn, int domain_groups) {
  nlohmann::json options;
  options_to_json(options, dsn);
  return nlohmann::json{{"kind", "dsn"}, {"domains", dsn.domains}, {"options", options}, {"domain_groups", domain_groups}}
      .dump();
}

void check_dsn_resume(const std::string& path, int domain_groups) {
  check_written_groups(path, read_checkpoint_meta(path).extra_model, domain_groups);
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
                  CheckpointMeta meta, TrainHooks* hooks, const std::vector<TrainingPair>& validation,
                  TrainObserver* observer) {
  check_dsn_training(dsn->unet->options(), dsn->options(), domains, options);
  for (const TrainingPair& p : validation)
    if (!p.labels || p.image->info().extent != p.labels->info().extent)
      throw Error(p.image->info().path + ": a validation image needs labels of its size");
  TrainHooks one_process;
  DsnModel model(dsn, hooks ? *hooks : one_process);
  meta.extra_model = dsn_extra_model(dsn->options(), model.groups());
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
