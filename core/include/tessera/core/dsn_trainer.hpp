#pragma once
// Training a Domain Separation Network (dsn.hpp): a labelled source domain (0) and unlabelled
// target domains (1 … D−1), each drawing its own random tiles. One process trains every
// domain; under domain parallelism (parallel/domain_hooks.hpp) each group of ranks trains
// some of them and DsnHooks carries what crosses groups. Reports to a TrainObserver as the
// U-Net trainer does (metrics records with the loss terms, checkpoint bytes).
//
// Exactness. The step's loss is the single-device DSN's sum over domains (dsn_spec.hpp), and
// every term is a function of sums over the domains' global batches:
//   - task: the source's loss statistics (losses.hpp) summed over its replicas;
//   - reconstruction: Σ_i simse_i / B over each domain's global batch of B tiles;
//   - difference: G = Σ rows Ĥ_cᵀ Ĥ_p summed over the domain's replicas, ‖G / M‖²_F;
//   - DANN: per level, Σ over samples and positions of CE(classifier(GRL(h)), d) / (D · B ·
//     positions), averaged over the levels;
//   - MMD: every domain's pooled codes gathered (sum_all of a D × B × C buffer, each rank
//     filling its own rows), the MMD² of the source against each target.
// A process's own terms keep their graph and the others' enter as constants, so its backward
// is its share of the gradient; DsnHooks::on_gradients SUMS the shares (shared parameters
// over all processes, private encoders over their domain's replicas). Domain d's tiles come
// from the stream seeded by seed + 7919·(d + 1), the global batch of batch × replicas tiles
// as TrainHooks describe, so 1 process with batch P·b takes the steps of P replicas × b.
//
// Not supported (refused by TrainOptions checks in train_dsn): accumulate > 1, grad_clip,
// resume (the checkpoint holds no optimiser state yet), validation (Dice on the source's
// holdout is `tessera eval` on the checkpoint).
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/dsn.hpp"
#include "tessera/core/train_observer.hpp"
#include "tessera/core/trainer.hpp"

namespace tessera {

class DsnHooks {
 public:
  virtual ~DsnHooks() = default;
  /// The domains this process trains, ascending; one process: all `total`.
  virtual std::vector<int> domains(int total) const;
  /// This process's slice of each of its domains' global batch, in [0, replicas()).
  virtual int replica() const { return 0; }
  virtual int replicas() const { return 1; }
  /// Whether this process reports to the TrainObserver (exactly one does).
  virtual bool writes_outputs() const { return true; }
  /// In place: element-wise sum over the replicas of this process's domains.
  virtual void sum_replicas(torch::Tensor& /*t*/) {}
  /// In place: element-wise sum over every process.
  virtual void sum_all(torch::Tensor& /*t*/) {}
  /// Before the first step: shared parameters from the first process, each private encoder
  /// from its domain's first replica.
  virtual void on_start(DsnImpl& /*dsn*/) {}
  /// After backward: shared gradients summed over every process, private ones over replicas.
  virtual void on_gradients(DsnImpl& /*dsn*/) {}
  /// Collective, for a checkpoint: on the writing process `all` (holding every domain's
  /// private encoder) receives each private encoder from its owner. Default: from `dsn`.
  virtual void gather_private(DsnImpl& dsn, DsnPartsImpl& all);
  virtual void on_step(int64_t /*step*/, double /*loss*/) {}
};

/// The checkpoint description's extra_model for `dsn`: {"kind": "dsn", "domains", "options"}.
std::string dsn_extra_model(const DsnOptions& dsn);
/// Reads it back; throws tessera::Error when it is not a DSN's.
DsnOptions dsn_options_from_extra_model(const std::string& json);

/// What train_dsn refuses, checked before anything runs (the CLI calls it before it makes a
/// run directory): throws tessera::Error naming the field or the file (a target image whose
/// bands or dimensions are not the source's, accumulate > 1, grad_clip, resume).
void check_dsn_training(const UNetOptions& unet, const DsnOptions& dsn,
                        const std::vector<std::vector<TrainingPair>>& domains, const TrainOptions& options);

/// Trains `dsn` in place on `domains` (index 0 the source with labels, the others targets:
/// pairs with labels == nullptr). `meta` describes the U-Net (norm: the source's
/// normalisation, used for every domain, as inference will); its extra_model is filled in.
/// Checkpoints hold the U-Net and every domain's private encoder, decoder and classifier.
TrainReport train_dsn(Dsn& dsn, const std::vector<std::vector<TrainingPair>>& domains, const TrainOptions& options,
                      CheckpointMeta meta, DsnHooks* hooks = nullptr, TrainObserver* observer = nullptr);

/// A DSN checkpoint's every part: the U-Net and DsnParts of all domains.
struct LoadedDsn {
  Dsn dsn{nullptr};
  CheckpointMeta meta;
};
/// Throws tessera::Error("<path>: …") as load_checkpoint, or when the file is not a DSN's.
LoadedDsn load_dsn_checkpoint(const std::string& path);

}  // namespace tessera
