#pragma once
// The seam between the one-process trainer (core/) and the parallel modes (parallel/).
// core never sees a communicator: the trainer calls these hooks at fixed points and
// parallel/ implements them (DataParallelHooks). The defaults are one process.
//
// Contract for exact data parallelism. Every replica draws the same global batch of
// `replicas() · batch` tiles from the same random stream and reads only its slice
// [replica() · batch, (replica() + 1) · batch). The loss of the global batch is a function of
// per-sample sums (cross-entropy sum, valid-pixel count, Dice intersections and
// denominators); the trainer sums those statistics across replicas with `sum()`, so each
// replica's backward yields its share of the global-batch gradient, and `on_gradients()`
// must SUM the shares (equivalently: average P × share). Then P replicas with batch b take
// the same optimiser steps as one process with batch P · b, up to float rounding.
// All hooks are called on the training thread only, in the same order on every replica.
//
// A model of several domains (a Domain Separation Network, dsn_training.hpp) runs its own
// forward: the hooks say which domains this process trains (domain parallelism: each domain
// group its own), sum what a loss term needs over every domain group (sum_domains), and with
// spatial parallelism hand out this process's block of every tile and the decomposition to
// run the forward under (core/decomposition.hpp). parallel/modes/domain_hooks.hpp implements
// them from the process grid.
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include <torch/types.h>

#include "tessera/core/decomposition.hpp"

#include "tessera/core/losses.hpp"
#include "tessera/core/train_observer.hpp"
#include "tessera/core/unet.hpp"

namespace tessera {

/// What forward_backward() did: the global batch's loss and its weighted labelled-pixel
/// count W (loss statistics entry 0); W <= 0 means the batch teaches nothing (no backward).
struct HookedStep {
  double loss = 0;
  double labelled = 0;
};

class TrainHooks {
 public:
  virtual ~TrainHooks() = default;
  /// This replica's slice of the global batch, in [0, replicas()).
  virtual int replica() const { return 0; }
  virtual int replicas() const { return 1; }
  /// Whether this process reports metrics and checkpoints to the TrainObserver (exactly one replica does).
  virtual bool writes_outputs() const { return true; }
  /// Before the first step: make every replica's parameters and buffers equal (broadcast).
  virtual void on_start(UNet& /*net*/) {}
  /// In place: element-wise sum of a CPU float tensor over replicas (loss statistics, metrics).
  virtual void sum(torch::Tensor& /*t*/) {}
  /// Pipeline parallelism: the hooks run this replica's forward and backward of `input` →
  /// `target` themselves (every rank of the replica gets the same tensors), adding
  /// `scale` × the gradient of the global-batch loss into `net`'s parameter gradients on
  /// this rank's share of the parameters; nullopt (the default) lets the trainer do it.
  virtual std::optional<HookedStep> forward_backward(UNet& /*net*/, const torch::Tensor& /*input*/,
                                                     const torch::Tensor& /*target*/, const LossOptions& /*loss*/,
                                                     double /*scale*/) {
    return std::nullopt;
  }
  /// Just before each backward the trainer runs itself; `last` is true for the step's last
  /// micro-batch, whose backward completes the step's gradients (data parallelism starts
  /// reducing them during it).
  virtual void before_backward(UNet& /*net*/, bool /*last*/) {}
  /// After backward, before the optimiser step: sum every parameter's gradient over replicas.
  virtual void on_gradients(UNet& /*net*/) {}
  /// After each step (progress, telemetry); `loss` is the global-batch loss or NaN.
  virtual void on_step(int64_t /*step*/, double /*loss*/) {}
  /// Domain parallelism: the domains whose tiles this process draws out of `total`,
  /// ascending; every one by default.
  virtual std::vector<int> domains(int total) const {
    std::vector<int> all(static_cast<size_t>(total));
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  /// In place: element-wise sum of a CPU tensor over the replicas (sum()) and then over the
  /// domain groups: what a loss term needs from the other domains. sum() by default.
  virtual void sum_domains(torch::Tensor& t) { sum(t); }
  /// Spatial parallelism for a model that runs its own forward: the decomposition this
  /// process's blocks of every tile belong to (the model runs its forward under a
  /// DecompositionScope of it and sums block statistics with its image_sum); null: whole tiles.
  virtual const Decomposition* tile_decomposition() const { return nullptr; }
  /// This process's block of `tiles`, whose spatial axes start at `first_axis` (blocks start
  /// on multiples of `alignment`); the tiles themselves without a decomposition.
  virtual torch::Tensor block(const torch::Tensor& tiles, int64_t /*first_axis*/, int64_t /*alignment*/) const {
    return tiles;
  }
  /// The last step's gradient communication (reported in its metrics line); none without one.
  virtual std::optional<StepCommunication> last_communication() const { return std::nullopt; }
};

}  // namespace tessera
