#pragma once
// Domain parallelism for a Domain Separation Network (core/dsn_training.hpp), after Tsaris &
// Hinkle's Multi-DSN, as the domain axis of the process grid (process_grid.hpp): G domain
// groups, group g training the domains [⌊g·D/G⌋, ⌊(g+1)·D/G⌋) and building only their private
// encoders, so a rank's memory stays flat as domains are added. Inside a group the grid's other
// axes compose: data replicas split every domain's global batch, and a spatial group splits
// every tile into blocks (spatial.hpp; the DSN runs its forward on its block under the
// decomposition). Implements core's TrainHooks for the DSN bound to it (bind):
//   - domains(): this group's;
//   - on_start: the shared parameters (U-Net, reconstruction decoder, domain classifier) and
//     buffers from world rank 0, the private encoders from the group's first rank;
//   - on_gradients: shared gradients SUMMED over the spatial, data and domain axes (the
//     single-device loss sums over blocks, samples and domains), private gradients over the
//     spatial and data axes (their group's ranks);
//   - sum over the data group (the source's loss statistics, the difference statistics,
//     validation), sum_domains over the data and domain groups (what a loss needs from other
//     domains: MMD codes, reported terms, the private encoders a checkpoint gathers);
//   - tile_decomposition() and block(): the spatial group's blocks of every tile.
// With G = 1 this is data (× spatial) parallelism of the whole DSN; with G = D one domain per
// group. Pipeline stages (the grid's pipeline axis > 1): every rank keeps the whole DSN and its
// optimiser, and the step runs through a StagedPipeline (staged_pipeline.hpp) over the DSN's
// chain of encoder levels (shared and private side by side, their codes and the skips so far
// travelling together) and heads (both decoders, the classifier, the loss terms) on the last
// stage; the micro-batches are the domains this group trains, one domain's batch each (the
// difference loss is a function of a domain's whole batch). Gradients are then summed over
// the pipeline group too (each stage has its own layers').
#include <functional>
#include <memory>
#include <vector>

#include "tessera/core/dsn.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/core/staged_work.hpp"
#include "tessera/core/train_hooks.hpp"
#include "tessera/parallel/comm/process_grid.hpp"
#include "tessera/parallel/modes/spatial.hpp"

namespace tessera::parallel {

/// The domains group `group` of `groups` trains out of `domains`, ascending.
std::vector<int> domains_of_group(int group, int groups, int domains);

/// Groups for `ranks` ranks (the world over pipeline × spatial) and `domains` domains: with
/// `replicas` > 0, ranks / replicas (throws tessera::Error unless it divides the ranks and is at
/// most the domains); with 0, the largest divisor of the ranks that is at most the domains.
int domain_groups(int ranks, int domains, int replicas);

struct DomainHookOptions {
  bool writes_outputs = true;  ///< set on exactly one rank (world rank 0)
  PipelineScheduleKind schedule = PipelineScheduleKind::kOneFOneB;  ///< with pipeline stages
  ActivationCheckpoint checkpoint = ActivationCheckpoint::kNever;    ///< with pipeline stages
  DomainHookOptions& with_writes_outputs(bool v) { writes_outputs = v; return *this; }
  DomainHookOptions& with_schedule(PipelineScheduleKind s) { schedule = s; return *this; }
  DomainHookOptions& with_checkpoint(ActivationCheckpoint c) { checkpoint = c; return *this; }
};

class StagedPipeline;

class DomainTrainHooks : public TrainHooks, public StagedHooks {
 public:
  /// `grid`'s domain, data, pipeline and spatial groups (not owned, must outlive the hooks; its
  /// domain axis at most `domains`); `mesh`: the blocks of every tile
  /// (mesh.size() == the spatial axis; only used when it is > 1).
  DomainTrainHooks(const ProcessGrid& grid, int domains, SpatialMesh mesh, DomainHookOptions options = {});
  ~DomainTrainHooks() override;
  /// The DSN these hooks synchronise (not owned; built with domains(D)'s private encoders),
  /// before training starts.
  void bind(DsnImpl& dsn) { dsn_ = &dsn; }

  std::vector<int> domains(int total) const override;
  int replica() const override { return data_.rank(); }
  int replicas() const override { return data_.size(); }
  bool writes_outputs() const override { return options_.writes_outputs; }
  void sum(torch::Tensor& t) override;
  void sum_domains(torch::Tensor& t) override;
  const Decomposition* tile_decomposition() const override { return decomposition_.get(); }
  torch::Tensor block(const torch::Tensor& tiles, int64_t first_axis, int64_t alignment) const override;
  void on_start(UNet& net) override;
  void on_gradients(UNet& net) override;
  void on_step(int64_t step, double loss) override;
  int stages() const override { return pipeline_.size(); }
  /// Throws tessera::Error when the DSN has fewer layers (levels + 1) than stages.
  void run_stages(StagedWork& work) override;

  void set_step_callback(std::function<void(int64_t, double)> fn) { step_callback_ = std::move(fn); }
  int group() const { return domain_.rank(); }
  int groups() const { return domain_.size(); }

 protected:
  DsnImpl& dsn() const;
  std::vector<torch::Tensor> private_parameters() const;

 private:
  Communicator& domain_;
  Communicator& data_;
  Communicator& spatial_;
  Communicator& pipeline_;
  int domains_;
  DomainHookOptions options_;
  std::unique_ptr<SpatialDecomposition> decomposition_;  // with a spatial axis > 1
  std::function<void(int64_t, double)> step_callback_;
  DsnImpl* dsn_ = nullptr;
  std::unique_ptr<StagedPipeline> stages_;  // with a pipeline axis > 1, built at the first step
};

}  // namespace tessera::parallel
