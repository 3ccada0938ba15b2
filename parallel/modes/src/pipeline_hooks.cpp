#include "tessera/parallel/modes/pipeline_hooks.hpp"

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/layer_sequence.hpp"
#include "tessera/parallel/comm/model_sync.hpp"
#include "tessera/parallel/modes/pipeline.hpp"

namespace tessera::parallel {

void PipelineHookOptions::validate() const {
  if (micro_batches < 0)
    throw Error("parallel.micro_batches: " + std::to_string(micro_batches) + " must be >= 0 (0: one tile per micro-batch)");
}

PipelineTrainHooks::PipelineTrainHooks(Communicator& pipeline, Communicator& data, PipelineHookOptions options)
    : pipeline_(pipeline), data_(data), options_(options) {
  options_.validate();
}

PipelineTrainHooks::PipelineTrainHooks(Communicator& pipeline, Communicator& data, Communicator& spatial,
                                       SpatialMesh mesh, PipelineHookOptions options)
    : PipelineTrainHooks(pipeline, data, options) {
  decomposition_ = std::make_unique<SpatialDecomposition>(spatial, std::move(mesh));
}

PipelineTrainHooks::~PipelineTrainHooks() = default;

void PipelineTrainHooks::on_start(UNet& net) {
  // World rank 0 to its pipeline, then to its spatial group, then each rank to its replicas.
  if (decomposition_)
    broadcast_module(*net, {&pipeline_, &decomposition_->group(), &data_});
  else
    broadcast_module(*net, {&pipeline_, &data_});
}

void PipelineTrainHooks::sum(torch::Tensor& t) { data_.allreduce(t, ReduceOp::kSum); }

std::optional<HookedStep> PipelineTrainHooks::forward_backward(UNet& net, const torch::Tensor& input,
                                                               const torch::Tensor& target, const LossOptions& loss,
                                                               double scale) {
  // W of the global batch from the labels alone (every rank of the replica has them).
  torch::Tensor labelled = torch::tensor({weighted_label_count(target, loss, net->options().classes)}, torch::kFloat64);
  data_.allreduce(labelled, ReduceOp::kSum);
  HookedStep out;
  out.labelled = labelled.item<double>();
  if (out.labelled <= 0) return out;

  const int64_t side = input.size(2);
  const int m = options_.micro_batches > 0 ? options_.micro_batches : int(input.size(0));
  if (!trainer_ || side != side_ || m != micro_) {
    const LayerSequence seq = net->layer_sequence(side);
    const auto mo =
        StageMemoryOptions().with_micro_batches(m).with_schedule(options_.schedule).with_checkpoint(options_.checkpoint);
    balance_ = balance_by_memory(seq, pipeline_.size(), mo).sizes;
    trainer_.reset();  // the previous stage's memory first
    trainer_ = std::make_unique<PipelineTrainer>(
        *net, side, pipeline_, data_,
        PipelineOptions(balance_)
            .with_micro_batches(m)
            .with_schedule(options_.schedule)
            .with_checkpoint(options_.checkpoint)
            .with_loss(loss)
            .with_keep_output(options_.keep_output),
        decomposition_.get());
    side_ = side;
    micro_ = m;
  }
  // The stage computes with the model's current weights.
  torch::NoGradGuard no_grad;
  auto stage_params = trainer_->stage()->named_parameters();
  const auto model_params = net->named_parameters();
  for (auto& item : stage_params) item.value().copy_(model_params[item.key()]);
  {
    torch::AutoGradMode enable(true);
    if (decomposition_) {  // this rank's blocks of the tiles
      const int64_t alignment = unet_alignment(net->options());
      out.loss = trainer_->train_step(decomposition_->scatter(input, 2, alignment).contiguous(),
                                      decomposition_->scatter(target, 1, alignment).contiguous());
    } else {
      out.loss = trainer_->train_step(input, target);
    }
  }
  for (auto& item : stage_params) {
    torch::Tensor p = model_params[item.key()];
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    p.mutable_grad().add_(item.value().grad(), scale);
  }
  return out;
}

void PipelineTrainHooks::on_gradients(UNet& net) {
  // Each stage holds its own layers' gradients; the PipelineTrainer already summed them over
  // the replicas, so only the pipeline remains.
  if (pipeline_.size() > 1) sum_gradients(net->parameters(), {&pipeline_});
}

const PipelineStepStats* PipelineTrainHooks::last_step() const { return trainer_ ? &trainer_->last_step() : nullptr; }

torch::Tensor PipelineTrainHooks::last_output() const { return trainer_ ? trainer_->last_output() : torch::Tensor(); }

void PipelineTrainHooks::on_step(int64_t step, double loss) {
  if (step_callback_) step_callback_(step, loss);
}

}  // namespace tessera::parallel
