#include "tessera/parallel/modes/spatial_hooks.hpp"

#include <cmath>

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/model_sync.hpp"

namespace tessera::parallel {

SpatialTrainHooks::SpatialTrainHooks(Communicator& spatial, Communicator& data, SpatialMesh mesh,
                                     SpatialHookOptions options)
    : spatial_(spatial),
      data_(data),
      options_(options),
      decomposition_(spatial, std::move(mesh), options.sync_batch_norm ? &data : nullptr) {}

void SpatialTrainHooks::on_start(UNet& net) {
  if (net->options().padding != Padding::kSame)
    throw Error("--sp " + std::to_string(spatial_.size()) +
                ": spatial parallelism needs a `same`-padding U-Net (use --padding same)");
  // World rank 0 to its spatial group, then each block position to its replicas.
  broadcast_module(*net, {&spatial_, &data_});
}

void SpatialTrainHooks::sum(torch::Tensor& t) { data_.allreduce(t, ReduceOp::kSum); }

std::optional<HookedStep> SpatialTrainHooks::forward_backward(UNet& net, const torch::Tensor& input,
                                                              const torch::Tensor& target, const LossOptions& loss,
                                                              double scale) {
  // W of the global batch from the labels alone (every rank of the replica has the whole tiles).
  torch::Tensor labelled = torch::tensor({weighted_label_count(target, loss, net->options().classes)}, torch::kFloat64);
  data_.allreduce(labelled, ReduceOp::kSum);
  HookedStep out;
  out.labelled = labelled.item<double>();
  if (out.labelled <= 0) return out;
  const int64_t alignment = unet_alignment(net->options());
  std::vector<int64_t> sides(input.sizes().begin() + 2, input.sizes().end());
  decomposition_.check_halo_fits(sides, alignment, (net->options().kernel - 1) / 2);
  const torch::Tensor block = decomposition_.scatter(input, 2, alignment).contiguous();
  const torch::Tensor block_target = decomposition_.scatter(target, 1, alignment).contiguous();
  torch::Tensor logits;
  {
    DecompositionScope scope(decomposition_);
    logits = net->forward(block);
  }
  // Statistics of the whole batch: this rank's keep their graph, the others' enter as
  // constants, so backward gives this rank's share of the global gradient.
  const torch::Tensor local = loss_statistics(logits, block_target, loss);
  torch::Tensor global = local.detach().contiguous().clone();
  spatial_.allreduce(global, ReduceOp::kSum);
  data_.allreduce(global, ReduceOp::kSum);
  const torch::Tensor value = loss_from_statistics(local + (global - local.detach()), loss, net->options().classes);
  out.loss = value.item<double>();
  if (std::isfinite(out.loss)) (value * scale).backward();
  return out;
}

void SpatialTrainHooks::on_gradients(UNet& net) { sum_gradients(net->parameters(), {&spatial_, &data_}); }

void SpatialTrainHooks::on_step(int64_t step, double loss) {
  if (step_callback_) step_callback_(step, loss);
}

}  // namespace tessera::parallel
