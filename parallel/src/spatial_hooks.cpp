#include "tessera/parallel/spatial_hooks.hpp"

#include <cmath>

#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera::parallel {

int64_t unet_block_alignment(const UNetOptions& o) { return int64_t{1} << (o.levels - 1); }

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
  torch::NoGradGuard no_grad;
  for (Communicator* group : {&spatial_, &data_}) {
    for (auto& p : net->parameters()) group->broadcast(p, 0);
    for (auto& b : net->buffers())
      if (b.defined()) group->broadcast(b, 0);
  }
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
  const int64_t alignment = unet_block_alignment(net->options());
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

void SpatialTrainHooks::on_gradients(UNet& net) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (auto& p : net->parameters()) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  if (spatial_.size() > 1) allreduce_sum_packed(spatial_, grads);
  if (data_.size() > 1) allreduce_sum_packed(data_, grads);
}

void SpatialTrainHooks::on_step(int64_t step, double loss) {
  if (step_callback_) step_callback_(step, loss);
}

}  // namespace tessera::parallel
