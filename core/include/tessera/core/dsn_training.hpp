#pragma once
// Training a Domain Separation Network (dsn.hpp): a labelled source domain (0) and unlabelled
// target domains (1 … D−1), each drawing its own random tiles. The DSN is a model and its loss
// terms for the one trainer (trainer.hpp): the same steps, schedule, accumulation, clipping,
// checkpoints (the U-Net, every domain's private encoder, decoder and classifier, the
// optimiser), resume, validation (of the task network on the source's holdout), early
// stopping and reports — the step's line carries the four terms. Domain parallelism is a
// placement the hooks describe (train_hooks.hpp; parallel/modes/domain_hooks.hpp builds them
// from the process grid's domain axis): which domains' tiles and private encoders this process
// has; one process has them all.
//
// Exactness. The step's loss is the single-device DSN's sum over domains (dsn_spec.hpp), and
// every term is a function of sums over the domains' global batches:
//   - task: the source's loss statistics (losses.hpp) summed over its replicas (hooks.sum);
//   - reconstruction: Σ_i simse_i / B over each domain's global batch of B tiles;
//   - difference: G = Σ rows Ĥ_cᵀ Ĥ_p summed over the domain's replicas, ‖G / M‖²_F;
//   - DANN: per level, Σ over samples and positions of CE(classifier(GRL(h)), d) / (D · B ·
//     positions), averaged over the levels;
//   - MMD: every domain's pooled codes gathered (hooks.sum_domains of a D × B × C buffer, each
//     process filling its own rows), the MMD² of the source against each target.
// A process's own terms keep their graph and the others' enter as constants, so its backward
// is its share of the gradient; the hooks' on_gradients SUMS the shares (shared parameters
// over every process, private encoders over their domain's replicas). Domain d's tiles come
// from the stream seeded by seed + 7919·(d + 1), the global batch of batch × replicas tiles
// as TrainHooks describe, so 1 process with batch P·b takes the steps of P replicas × b.
// With accumulate > 1 the step's loss is the mean of its micro-batches' DSN losses.
//
// Spatial parallelism (hooks.tile_decomposition()): every tile is split into blocks, each process
// runs the whole DSN on its block under the decomposition (halo exchanges, whole-tile norm
// statistics) and every term above is first summed over the blocks: the task's statistics,
// each sample's reconstruction error (its mean over the tile, then the squared deviations), G
// and its row count, the DANN's cross-entropy sums and positions, the pooled codes' sums and
// pixel counts (dsn.hpp) — again this block's part with its graph, the others' as constants,
// the blocks' gradients summed by the hooks.
//
// Pipeline stages (hooks that implement StagedHooks, staged_work.hpp, with stages() > 1): the
// DSN is a chain of L + 1 layers — encoder level ℓ of the shared and the domain's private
// encoder side by side, then the heads and every term above on the last stage — whose
// boundaries carry the shared code, the private code and the skips so far; the micro-batches
// are the domains this process trains, one domain's batch each (the difference term is a
// function of a domain's whole batch). The hooks run forwards and backwards; the terms are
// those above, each micro-batch's scaled by 1 / accumulate. MMD is refused there (it needs
// every domain's batch before any backward, which a pipeline schedule does not wait for).
//
// A process that does not hold every private encoder (several domain groups) sends its
// domains' private encoders, their optimiser state and tile streams to the writer, whose
// checkpoint is the one-process layout (dsn_checkpoint.cpp); a resume on as many domain
// groups hands each group its part back from it. grad_clip takes the global norm there too
// (the shared gradients' once, each private encoder's once).
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/dsn.hpp"
#include "tessera/core/train_hooks.hpp"
#include "tessera/core/train_observer.hpp"
#include "tessera/core/trainer.hpp"

namespace tessera {

/// The checkpoint description's extra_model for `dsn` trained by `domain_groups` groups:
/// {"kind": "dsn", "domains", "options", "domain_groups"}.
std::string dsn_extra_model(const DsnOptions& dsn, int domain_groups = 1);
/// Reads it back; throws tessera::Error when it is not a DSN's.
DsnOptions dsn_options_from_extra_model(const std::string& json);

/// Throws tessera::Error("<path>: …", one line with both counts) unless the DSN checkpoint at
/// `path` was written by `domain_groups` domain groups: a resume needs as many (train() checks
/// it too; the engine before it writes anything). Checkpoints that do not say were written by one.
void check_dsn_resume(const std::string& path, int domain_groups);

/// What DSN training refuses, checked before anything runs (the CLI calls it before it makes
/// a run directory): throws tessera::Error naming the field or the file (a target image whose
/// bands or dimensions are not the source's, a source without labels).
void check_dsn_training(const UNetOptions& unet, const DsnOptions& dsn,
                        const std::vector<std::vector<TrainingPair>>& domains, const TrainOptions& options);

/// Trains `dsn` in place on `domains` (index 0 the source with labels, the others targets:
/// pairs with labels == nullptr) with the one trainer. `hooks` synchronise every part of the
/// DSN and say where its domains are (domain_hooks.hpp; null: one process, every domain);
/// `dsn`'s private encoders must be hooks->domains()'. `meta` describes the U-Net (norm: the
/// source's normalisation, used for every domain, as inference will); its extra_model is
/// filled in. `validation`: the source's held-out pairs, scored with the task network.
/// Otherwise as train(UNet&, …).
TrainReport train(Dsn& dsn, const std::vector<std::vector<TrainingPair>>& domains, const TrainOptions& options,
                  CheckpointMeta meta, TrainHooks* hooks = nullptr, const std::vector<TrainingPair>& validation = {},
                  TrainObserver* observer = nullptr);

/// A DSN checkpoint's every part: the U-Net and DsnParts of all domains.
struct LoadedDsn {
  Dsn dsn{nullptr};
  CheckpointMeta meta;
};
/// Throws tessera::Error("<path>: …") as load_checkpoint, or when the file is not a DSN's.
LoadedDsn load_dsn_checkpoint(const std::string& path);

}  // namespace tessera
