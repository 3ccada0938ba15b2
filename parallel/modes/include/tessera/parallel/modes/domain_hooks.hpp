#pragma once
// Domain parallelism for a Domain Separation Network (core/dsn_trainer.hpp), after Tsaris &
// Hinkle's Multi-DSN: the world's ranks form G groups of R consecutive ranks (R = the
// data-parallel replicas inside a group); group g trains the domains
// [⌊g·D/G⌋, ⌊(g+1)·D/G⌋) and builds only their private encoders, so a rank's memory stays
// flat as domains are added. Each replica of a group draws its slice of every one of its
// domains' global batch. Implements core's DsnHooks:
//   - on_start: the shared parameters (U-Net, reconstruction decoder, domain classifier) from
//     world rank 0, the private encoders from the group's first replica;
//   - on_gradients: shared gradients SUMMED over the world (the single-device loss sums over
//     domains), private gradients summed over the group's replicas;
//   - sum_replicas over the group (the source's loss statistics, the difference statistics),
//     sum_all over the world (what a loss needs from other domains: MMD codes, reported terms);
//   - gather_private: every private encoder sent to world rank 0 for the checkpoint.
// With G = 1 this is data parallelism of the whole DSN; with G = D one domain per group.
#include <memory>
#include <vector>

#include "tessera/core/dsn_trainer.hpp"
#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {

/// The domains group `group` of `groups` trains out of `domains`, ascending.
std::vector<int> domains_of_group(int group, int groups, int domains);

/// Groups for `ranks` ranks and `domains` domains: with `replicas` > 0, ranks / replicas
/// (throws tessera::Error unless it divides the ranks and is at most the domains); with 0,
/// the largest divisor of the ranks that is at most the domains.
int domain_groups(int ranks, int domains, int replicas);

class DomainParallelHooks : public DsnHooks {
 public:
  /// Collective over `world` (splits it). `groups` must divide world.size() and be <= domains.
  DomainParallelHooks(Communicator& world, int groups, int domains);
  ~DomainParallelHooks() override;

  std::vector<int> domains(int total) const override;
  int replica() const override;
  int replicas() const override;
  bool writes_outputs() const override { return world_.rank() == 0; }
  void sum_replicas(torch::Tensor& t) override;
  void sum_all(torch::Tensor& t) override;
  void on_start(DsnImpl& dsn) override;
  void on_gradients(DsnImpl& dsn) override;
  void gather_private(DsnImpl& dsn, DsnPartsImpl& all) override;

  int group() const { return group_index_; }
  int groups() const { return groups_; }

 private:
  std::vector<torch::Tensor> private_parameters(DsnImpl& dsn) const;
  Communicator& world_;
  int groups_, domains_, group_index_;
  std::unique_ptr<Communicator> group_;  // this rank's group: the replicas of its domains
};

}  // namespace tessera::parallel
