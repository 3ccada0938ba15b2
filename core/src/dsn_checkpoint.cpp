#include "dsn_checkpoint.hpp"

#include <cstring>
#include <sstream>

#include <c10/util/string_utils.h>
#include <torch/torch.h>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/error.hpp"

namespace tessera::detail {
namespace {

using StateMap = ska::flat_hash_map<std::string, std::unique_ptr<torch::optim::OptimizerParamState>>;

// How LibTorch's optimisers key a parameter's state.
std::string state_key(const torch::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

// Private encoder `d` and its parameters' optimiser state as one archive's bytes.
std::string pack_private(DsnImpl& dsn, int d, const torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive, encoder, states;
  dsn.parts->private_encoder(d)->save(encoder);
  archive.write("encoder", encoder);
  const std::vector<torch::Tensor> params = dsn.parts->private_parameters(d);
  bool any = false;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto it = optimizer.state().find(state_key(params[i]));
    if (it == optimizer.state().end()) continue;  // no step yet, or a kind without state (plain SGD)
    torch::serialize::OutputArchive state;
    it->second->serialize(state);
    states.write(std::to_string(i), state);
    any = true;
  }
  if (any) archive.write("state", states);
  std::ostringstream bytes;
  archive.save_to(bytes);
  return std::move(bytes).str();
}

// The other side: into private encoder `d` of `parts` and `optimizer`'s state for its parameters
// (each state a copy of `prototype`'s kind, read back).
void unpack_private(const std::string& bytes, DsnPartsImpl& parts, int d, StateMap& state,
                    const torch::optim::OptimizerParamState* prototype) {
  torch::serialize::InputArchive archive, encoder, states;
  archive.load_from(bytes.data(), bytes.size());
  archive.read("encoder", encoder);
  parts.private_encoder(d)->load(encoder);
  if (!archive.try_read("state", states)) return;
  TESSERA_CHECK(prototype != nullptr);  // the writer's optimiser has state when a group's has
  const std::vector<torch::Tensor> params = parts.private_parameters(d);
  for (size_t i = 0; i < params.size(); ++i) {
    torch::serialize::InputArchive one;
    if (!states.try_read(std::to_string(i), one)) continue;
    std::unique_ptr<torch::optim::OptimizerParamState> s = prototype->clone();
    s->serialize(one);
    state[state_key(params[i])] = std::move(s);
  }
}

// The one-process parameter order: the U-Net's, then every part's.
std::vector<torch::Tensor> whole_dsn_parameters(DsnImpl& dsn, DsnPartsImpl& parts) {
  std::vector<torch::Tensor> params = dsn.unet->parameters();
  for (auto& p : parts.parameters()) params.push_back(p);
  return params;
}

}  // namespace

std::vector<int> all_domains(int total) {
  std::vector<int> d;
  for (int k = 0; k < total; ++k) d.push_back(k);
  return d;
}

void copy_module(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  const auto params = from.named_parameters();
  for (auto& p : to.named_parameters()) p.value().copy_(params[p.key()]);
  const auto buffers = from.named_buffers();
  for (auto& b : to.named_buffers()) b.value().copy_(buffers[b.key()]);
}

std::vector<std::string> gather_domain_strings(const std::vector<std::string>& mine, const std::vector<int>& local,
                                               int total, TrainHooks& hooks) {
  TESSERA_CHECK(mine.size() == local.size());
  const bool leader = hooks.replica() == 0;
  torch::Tensor lengths = torch::zeros({total}, torch::kLong);
  if (leader)
    for (size_t k = 0; k < local.size(); ++k) lengths[local[k]] = int64_t(mine[k].size());
  hooks.sum_domains(lengths);
  // Bytes as 8-byte words: each word is one process's or zeros, so the integer sum is exact.
  const int64_t words = (lengths.max().item<int64_t>() + 7) / 8;
  torch::Tensor packed = torch::zeros({total, std::max<int64_t>(words, 1)}, torch::kLong);
  if (leader)
    for (size_t k = 0; k < local.size(); ++k) std::memcpy(packed[local[k]].data_ptr(), mine[k].data(), mine[k].size());
  hooks.sum_domains(packed);
  std::vector<std::string> all(static_cast<size_t>(total));
  for (int d = 0; d < total; ++d)
    all[size_t(d)].assign(static_cast<const char*>(packed[d].data_ptr()), size_t(lengths[d].item<int64_t>()));
  return all;
}

bool GatheredDsn::gather(DsnImpl& dsn, const std::vector<int>& local, torch::optim::Optimizer& optimizer,
                         const OptimizerOptions& options, TrainHooks& hooks) {
  const int total = dsn.options().domains;
  std::vector<std::string> mine;
  for (int d : local) mine.push_back(hooks.replica() == 0 ? pack_private(dsn, d, optimizer) : std::string());
  const std::vector<std::string> all = gather_domain_strings(mine, local, total, hooks);
  if (!hooks.writes_outputs()) return false;
  if (!parts_) {
    parts_ = DsnParts(dsn.unet->options(), dsn.options(), all_domains(total), 0);
    optimizer_ = make_optimizer(whole_dsn_parameters(dsn, *parts_), options);
  }
  copy_module(*dsn.parts->recon, *parts_->recon);
  copy_module(*dsn.parts->classifier, *parts_->classifier);
  optimizer_->param_groups()[0].set_options(optimizer.param_groups()[0].options().clone());
  StateMap& state = optimizer_->state();
  state.clear();
  // The shared parameters' state is this process's own (the same on every process).
  const auto copy_state = [&](const torch::Tensor& from, const torch::Tensor& to) {
    const auto it = optimizer.state().find(state_key(from));
    if (it != optimizer.state().end()) state[state_key(to)] = it->second->clone();
  };
  for (auto& p : dsn.unet->parameters()) copy_state(p, p);
  const auto copy_states = [&](const torch::nn::Module& from, const torch::nn::Module& to) {
    const std::vector<torch::Tensor> f = from.parameters(), t = to.parameters();
    for (size_t i = 0; i < f.size(); ++i) copy_state(f[i], t[i]);
  };
  copy_states(*dsn.parts->recon, *parts_->recon);
  copy_states(*dsn.parts->classifier, *parts_->classifier);
  const torch::optim::OptimizerParamState* prototype =
      optimizer.state().empty() ? nullptr : optimizer.state().begin()->second.get();
  for (int d = 0; d < total; ++d) unpack_private(all[size_t(d)], *parts_, d, state, prototype);
  return true;
}

void restore_dsn_parts(const std::string& path, DsnImpl& dsn, torch::optim::Optimizer& optimizer,
                       const OptimizerOptions& options) {
  DsnParts saved(dsn.unet->options(), dsn.options(), all_domains(dsn.options().domains), 0);
  load_checkpoint_extra(path, *saved);
  copy_module(*saved, *dsn.parts);
  const std::unique_ptr<torch::optim::Optimizer> whole = make_optimizer(whole_dsn_parameters(dsn, *saved), options);
  load_optimizer_state(path, *whole);
  StateMap& from = whole->state();
  StateMap& to = optimizer.state();
  to.clear();
  const auto move_state = [&](const torch::Tensor& saved_param, const torch::Tensor& param) {
    const auto it = from.find(state_key(saved_param));
    if (it != from.end()) to[state_key(param)] = std::move(it->second);
  };
  for (auto& p : dsn.unet->parameters()) move_state(p, p);
  const auto saved_params = saved->named_parameters();
  for (auto& p : dsn.parts->named_parameters()) move_state(saved_params[p.key()], p.value());
  optimizer.param_groups()[0].set_options(whole->param_groups()[0].options().clone());
}

}  // namespace tessera::detail
