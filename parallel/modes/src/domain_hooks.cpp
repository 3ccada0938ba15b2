#include "tessera/parallel/modes/domain_hooks.hpp"

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/model_sync.hpp"

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

DomainParallelHooks::DomainParallelHooks(Communicator& world, int groups, int domains)
    : world_(world), groups_(groups), domains_(domains) {
  if (groups < 1 || world.size() % groups != 0 || groups > domains)
    throw Error(std::to_string(groups) + " domain groups for " + std::to_string(world.size()) + " ranks and " +
                std::to_string(domains) + " domains: the groups must divide the ranks and be at most the domains");
  const int replicas = world.size() / groups;
  group_index_ = world.rank() / replicas;
  group_ = world.split(group_index_, world.rank());
}

DomainParallelHooks::~DomainParallelHooks() = default;

std::vector<int> DomainParallelHooks::domains(int total) const {
  TESSERA_CHECK(total == domains_);
  return domains_of_group(group_index_, groups_, domains_);
}

int DomainParallelHooks::replica() const { return group_->rank(); }
int DomainParallelHooks::replicas() const { return group_->size(); }

void DomainParallelHooks::sum(torch::Tensor& t) {
  if (group_->size() > 1) group_->allreduce(t, ReduceOp::kSum);
}

void DomainParallelHooks::sum_all(torch::Tensor& t) {
  if (world_.size() > 1) world_.allreduce(t, ReduceOp::kSum);
}

DsnImpl& DomainParallelHooks::dsn() const {
  TESSERA_CHECK(dsn_ != nullptr);  // bind() before training
  return *dsn_;
}

std::vector<torch::Tensor> DomainParallelHooks::private_parameters() const {
  std::vector<torch::Tensor> p;
  for (int d : dsn().parts->owned())
    for (auto& t : dsn().parts->private_parameters(d)) p.push_back(t);
  return p;
}

void DomainParallelHooks::on_start(UNet& net) {
  TESSERA_CHECK(net.get() == dsn().unet.get());
  broadcast_tensors(dsn().shared_parameters(), {&world_});
  std::vector<torch::Tensor> buffers = dsn().unet->buffers();
  for (auto& b : dsn().parts->recon->buffers()) buffers.push_back(b);
  broadcast_tensors(buffers, {&world_});
  broadcast_tensors(private_parameters(), {group_.get()});
}

void DomainParallelHooks::on_gradients(UNet& /*net*/) {
  sum_gradients(dsn().shared_parameters(), {&world_});
  sum_gradients(private_parameters(), {group_.get()});
}

}  // namespace tessera::parallel
