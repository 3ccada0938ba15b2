#pragma once
// Internal to core: what the one trainer (trainer.cpp) trains. A TrainModel is a network and
// its loss: the plain U-Net (a segmentation loss over the global batch, trainer.cpp) or a
// Domain Separation Network (dsn_training.cpp: task, reconstruction, difference and
// similarity terms over every domain's batch). The trainer draws one tile stream per domain
// the model says this process trains, hands each micro-batch's samples to loss(), and owns
// everything else: optimiser and schedule, accumulation, clipping, validation of unet(),
// checkpoints, resume, reports. Training thread only.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/train_hooks.hpp"
#include "tessera/core/trainer.hpp"
#include "tile_sampler.hpp"

namespace tessera::detail {

/// One micro-batch's loss.
struct ModelLoss {
  torch::Tensor for_backward;  ///< this process's share of the global-batch loss (has a graph); undefined: the hooks ran the backward
  double value = 0;            ///< the global-batch loss
  double labelled = 0;         ///< <= 0: the batch teaches nothing (no backward, no step)
  std::vector<std::pair<std::string, double>> terms;  ///< named terms reported with the step (a DSN's)
};

class TrainModel {
 public:
  virtual ~TrainModel() = default;
  /// The task network: validated, and the checkpoint's model (inference reads it alone).
  virtual UNet& unet() = 0;
  /// Every parameter this process trains (the optimiser's, in this order).
  virtual torch::nn::Module& module() = 0;
  /// The domains this process draws tiles of, ascending, out of total_domains(); one stream each.
  virtual std::vector<int> domains() const { return {0}; }
  virtual int total_domains() const { return 1; }
  /// The sampler options of domain `d`'s stream.
  virtual TrainOptions stream_options(const TrainOptions& o, int /*domain*/) const { return o; }
  virtual void use_channels_last() { unet()->use_channels_last(); }
  /// One micro-batch: samples[k] is domain domains()[k]'s; `share` = 1 / accumulate;
  /// `progress` = (step − 1) / steps.
  virtual ModelLoss loss(std::vector<Sample>& samples, const TrainOptions& o, TrainHooks& hooks, double share,
                         double progress) = 0;
  /// After the hooks' on_gradients: scales every gradient so that their global L2 norm is
  /// at most `max_norm`; returns the norm before clipping.
  virtual double clip_gradients(double max_norm, TrainHooks& /*hooks*/);
  /// After the hooks' on_gradients (which sum the U-Net's): sums the gradients of the rest of
  /// module() over replicas, when the model has parameters beside the U-Net that need it.
  virtual void on_gradients(TrainHooks& /*hooks*/) {}
  /// Collective (every process, whenever a checkpoint is due): the module a checkpoint keeps
  /// beside the U-Net on the writing process; null: none.
  virtual const torch::nn::Module* checkpoint_extra(TrainHooks& /*hooks*/) { return nullptr; }
  /// Whether this process's optimiser covers the whole model (else checkpoints hold no
  /// optimiser state, and cannot be resumed).
  virtual bool optimizer_covers_model() const { return true; }
  /// On resume, after the U-Net's weights: the rest of the model from checkpoint `path`.
  virtual void resume_extra(const std::string& /*path*/, const CheckpointMeta& /*meta*/) {}
};

/// The loss of the global batch from statistics summed over replicas (hooks.sum), and first
/// over the blocks of every tile when `blocks` is given (logits and target are then this
/// rank's blocks): each process's own statistics keep their graph, the others' enter as
/// constants, so backward gives this process's share of the global gradient (train_hooks.hpp).
ModelLoss global_batch_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o,
                            TrainHooks& hooks, const Decomposition* blocks = nullptr);

/// The plain U-Net and its segmentation loss over the global batch (unet_train_model.cpp),
/// with deep supervision's heads and losses when asked (deep_supervision.hpp).
std::unique_ptr<TrainModel> unet_train_model(UNet& net, bool deep_supervision = false);

/// The one training loop. `data[d]` are domain d's pairs (one domain for a plain U-Net).
TrainReport run_training(TrainModel& model, const std::vector<std::vector<TrainingPair>>& data,
                         const TrainOptions& options, CheckpointMeta meta, TrainHooks* hooks,
                         const std::vector<TrainingPair>& validation, TrainObserver* observer);

}  // namespace tessera::detail
