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
#include "tessera/core/optim.hpp"
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
  /// What a checkpoint keeps beside the U-Net: a module (null: none) and the optimiser state
  /// (null: none).
  struct CheckpointParts {
    const torch::nn::Module* extra = nullptr;
    torch::optim::Optimizer* optimizer = nullptr;
  };
  /// Collective (every process, whenever a checkpoint is due): what the writing process's
  /// checkpoint keeps; `optimizer` is this process's (built from `options` over module()).
  virtual CheckpointParts checkpoint_parts(torch::optim::Optimizer& optimizer, const OptimizerOptions& /*options*/,
                                           TrainHooks& /*hooks*/) {
    return {nullptr, &optimizer};
  }
  /// Collective, with checkpoint_parts: every domain's tile-stream state (indexed by domain, of
  /// total_domains()) from `mine`, this process's streams' (in domains()' order).
  virtual std::vector<std::string> stream_states(std::vector<std::string> mine, TrainHooks& /*hooks*/) { return mine; }
  /// On resume, after the U-Net's weights: the rest of the model and `optimizer`'s state
  /// (built from `options` over module()) from checkpoint `path`.
  virtual void resume_extra(const std::string& path, const CheckpointMeta& /*meta*/, torch::optim::Optimizer& optimizer,
                            const OptimizerOptions& /*options*/) {
    load_optimizer_state(path, optimizer);
  }
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
