#include "tessera/parallel/modes/domain_hooks.hpp"

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/model_sync.hpp"
#include "tessera/parallel/modes/staged_pipeline.hpp"
#include "tessera/parallel/plan/partition.hpp"

namespace tessera::parallel {

std::vector<int> domains_of_group(int group, int groups, int domains) {
  TESSERA_CHECK(groups > 0 && group >= 0 && group < groups && groups <= domains);
  std::vector<int> out;
  for (int d = group * domains / groups; d < (group + 1) * domains / groups; ++d) out.push_back(d);
  return out;
}

int domain_groups(int ranks, int domains, int replicas) {
  if (replicas > 0) {
    if (ranks % replicas != 0)
      throw Error("--dp " + std::to_string(replicas) + ": does not divide the " + std::to_string(ranks) + " ranks");
    const int groups = ranks / replicas;
    if (groups > domains)
      throw Error("--dp " + std::to_string(replicas) + ": " + std::to_string(ranks) + " ranks make " +
                  std::to_string(groups) + " domain groups but there are only " + std::to_string(domains) +
                  " domains (use --dp " + std::to_string((ranks + domains - 1) / domains) + " or more)");
    return groups;
  }
  for (int g = std::min(ranks, domains); g > 1; --g)
    if (ranks % g == 0) return g;
  return 1;
}

DomainTrainHooks::DomainTrainHooks(const ProcessGrid& grid, int domains, SpatialMesh mesh, DomainHookOptions options)
    : domain_(grid.domain()), data_(grid.data()), spatial_(grid.spatial()), pipeline_(grid.pipeline()),
      domains_(domains), options_(options) {
  if (grid.shape().domain > domains)
    throw Error(std::to_string(grid.shape().domain) + " domain groups for " + std::to_string(domains) +
                " domains: at most one group per domain");
  if (spatial_.size() > 1) decomposition_ = std::make_unique<SpatialDecomposition>(spatial_, std::move(mesh));
}

DomainTrainHooks::~DomainTrainHooks() = default;

std::vector<int> DomainTrainHooks::domains(int total) const {
  TESSERA_CHECK(total == domains_);
  return domains_of_group(domain_.rank(), domain_.size(), domains_);
}

void DomainTrainHooks::sum(torch::Tensor& t) {
  if (data_.size() > 1) data_.allreduce(t, ReduceOp::kSum);
}

void DomainTrainHooks::sum_domains(torch::Tensor& t) {
  sum(t);
  if (domain_.size() > 1) domain_.allreduce(t, ReduceOp::kSum);
}

torch::Tensor DomainTrainHooks::block(const torch::Tensor& tiles, int64_t first_axis, int64_t alignment) const {
  if (!decomposition_) return tiles;
  return decomposition_->scatter(tiles, int(first_axis), alignment).contiguous();
}

DsnImpl& DomainTrainHooks::dsn() const {
  TESSERA_CHECK(dsn_ != nullptr);  // bind() before training
  return *dsn_;
}

std::vector<torch::Tensor> DomainTrainHooks::private_parameters() const {
  std::vector<torch::Tensor> p;
  for (int d : dsn().parts->owned())
    for (auto& t : dsn().parts->private_parameters(d)) p.push_back(t);
  return p;
}

void DomainTrainHooks::on_start(UNet& net) {
  TESSERA_CHECK(net.get() == dsn().unet.get());
  if (decomposition_ && net->options().padding != Padding::kSame)
    throw Error("--sp " + std::to_string(spatial_.size()) +
                ": spatial parallelism needs a `same`-padding U-Net (use --padding same)");
  // World rank 0 to its blocks, then to its replicas, then to the other domain groups.
  broadcast_tensors(dsn().shared_parameters(), {&pipeline_, &spatial_, &data_, &domain_});
  std::vector<torch::Tensor> buffers = dsn().unet->buffers();
  for (auto& b : dsn().parts->recon->buffers()) buffers.push_back(b);
  broadcast_tensors(buffers, {&pipeline_, &spatial_, &data_, &domain_});
  broadcast_tensors(private_parameters(), {&pipeline_, &spatial_, &data_});
}

void DomainTrainHooks::on_gradients(UNet& /*net*/) {
  sum_gradients(dsn().shared_parameters(), {&pipeline_, &spatial_, &data_, &domain_});
  sum_gradients(private_parameters(), {&pipeline_, &spatial_, &data_});
}

void DomainTrainHooks::run_stages(StagedWork& work) {
  if (!stages_) {
    if (work.layers() < pipeline_.size())
      throw Error("--pp " + std::to_string(pipeline_.size()) + ": the DSN has " + std::to_string(work.layers()) +
                  " stage layers (one per encoder level, then its heads), fewer than the stages");
    stages_ = std::make_unique<StagedPipeline>(pipeline_, balance_naive(work.layers(), pipeline_.size()).sizes,
                                               options_.schedule, options_.checkpoint);
  }
  stages_->run(work);
}

void DomainTrainHooks::on_step(int64_t step, double loss) {
  if (step_callback_) step_callback_(step, loss);
}

}  // namespace tessera::parallel
