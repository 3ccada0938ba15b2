#pragma once
// Domain parallelism for a Domain Separation Network (core/dsn_training.hpp), after Tsaris &
// Hinkle's Multi-DSN: a placement of the one trainer. The world's ranks form a domain axis of
// G groups of R consecutive ranks (R = the data-parallel replicas inside a group); group g
// trains the domains [⌊g·D/G⌋, ⌊(g+1)·D/G⌋) and builds only their private encoders, so a
// rank's memory stays flat as domains are added. Each replica of a group draws its slice of
// every one of its domains' global batch. Implements core's TrainHooks for the DSN bound to
// it (bind), and its DomainPlacement:
//   - domains(): this group's;
//   - on_start: the shared parameters (U-Net, reconstruction decoder, domain classifier) from
//     world rank 0, the private encoders from the group's first replica;
//   - on_gradients: shared gradients SUMMED over the world (the single-device loss sums over
//     domains), private gradients summed over the group's replicas;
//   - sum over the group (the source's loss statistics, the difference statistics, validation),
//     sum_all over the world (what a loss needs from other domains: MMD codes, reported terms,
//     the private encoders a checkpoint gathers).
// With G = 1 this is data parallelism of the whole DSN; with G = D one domain per group.
#include <memory>
#include <vector>

#include "tessera/core/dsn_training.hpp"
#include "tessera/core/train_hooks.hpp"
#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {

/// The domains group `group` of `groups` trains out of `domains`, ascending.
std::vector<int> domains_of_group(int group, int groups, int domains);

/// Groups for `ranks` ranks and `domains` domains: with `replicas` > 0, ranks / replicas
/// (throws tessera::Error unless it divides the ranks and is at most the domains); with 0,
/// the largest divisor of the ranks that is at most the domains.
int domain_groups(int ranks, int domains, int replicas);

class DomainParallelHooks : public TrainHooks, public DomainPlacement {
 public:
  /// Collective over `world` (splits it). `groups` must divide world.size() and be <= domains.
  DomainParallelHooks(Communicator& world, int groups, int domains);
  ~DomainParallelHooks() override;
  /// The DSN these hooks synchronise (not owned; built with domains(D)'s private encoders),
  /// before training starts.
  void bind(DsnImpl& dsn) { dsn_ = &dsn; }

  std::vector<int> domains(int total) const override;
  int replica() const override;
  int replicas() const override;
  bool writes_outputs() const override { return world_.rank() == 0; }
  void sum(torch::Tensor& t) override;
  void sum_all(torch::Tensor& t) override;
  void on_start(UNet& net) override;
  void on_gradients(UNet& net) override;

  int group() const { return group_index_; }
  int groups() const { return groups_; }

 protected:
  DsnImpl& dsn() const;

 private:
  std::vector<torch::Tensor> private_parameters() const;
  Communicator& world_;
  int groups_, domains_, group_index_;
  std::unique_ptr<Communicator> group_;  // this rank's group: the replicas of its domains
  DsnImpl* dsn_ = nullptr;
};

}  // namespace tessera::parallel
