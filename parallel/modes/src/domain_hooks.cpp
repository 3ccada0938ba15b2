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

void DomainParallelHooks::sum_replicas(torch::Tensor& t) {
  if (group_->size() > 1) group_->allreduce(t, ReduceOp::kSum);
}

void DomainParallelHooks::sum_all(torch::Tensor& t) {
  if (world_.size() > 1) world_.allreduce(t, ReduceOp::kSum);
}

std::vector<torch::Tensor> DomainParallelHooks::private_parameters(DsnImpl& dsn) const {
  std::vector<torch::Tensor> p;
  for (int d : dsn.parts->owned())
    for (auto& t : dsn.parts->private_parameters(d)) p.push_back(t);
  return p;
}

void DomainParallelHooks::on_start(DsnImpl& dsn) {
  broadcast_tensors(dsn.shared_parameters(), {&world_});
  std::vector<torch::Tensor> buffers = dsn.unet->buffers();
  for (auto& b : dsn.parts->recon->buffers()) buffers.push_back(b);
  broadcast_tensors(buffers, {&world_});
  broadcast_tensors(private_parameters(dsn), {group_.get()});
}

void DomainParallelHooks::on_gradients(DsnImpl& dsn) {
  sum_gradients(dsn.shared_parameters(), {&world_});
  sum_gradients(private_parameters(dsn), {group_.get()});
}

// Each private encoder travels flat from its owner (its group's first replica) to rank 0.
void DomainParallelHooks::gather_private(DsnImpl& dsn, DsnPartsImpl& all) {
  torch::NoGradGuard no_grad;
  const int replicas = world_.size() / groups_;
  for (int g = 0; g < groups_; ++g) {
    const int owner = g * replicas;
    for (int d : domains_of_group(g, groups_, domains_)) {
      if (owner == 0 && world_.rank() == 0) {
        auto src = dsn.parts->private_encoder(d)->parameters();
        auto dst = all.private_encoder(d)->parameters();
        for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
      } else if (world_.rank() == owner) {
        std::vector<torch::Tensor> flat;
        for (auto& p : dsn.parts->private_encoder(d)->parameters()) flat.push_back(p.detach().reshape({-1}));
        world_.send(torch::cat(flat), 0, d);
      } else if (world_.rank() == 0) {
        auto dst = all.private_encoder(d)->parameters();
        int64_t n = 0;
        for (auto& p : dst) n += p.numel();
        torch::Tensor flat = torch::empty({n}, torch::kFloat);
        world_.recv(flat, owner, d);
        int64_t at = 0;
        for (auto& p : dst) {
          p.copy_(flat.narrow(0, at, p.numel()).view(p.sizes()));
          at += p.numel();
        }
      }
    }
  }
}

}  // namespace tessera::parallel
