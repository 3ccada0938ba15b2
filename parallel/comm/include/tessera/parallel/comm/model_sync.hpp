#pragma once
// The two collectives every parallel training mode runs on its model: make the replicas'
// parameters and buffers equal before the first step, and sum the gradients after backward.
// Used by the pipeline, spatial and domain hooks (data-parallel training buckets its own
// gradient allreduce to overlap it with backward). Collective over each group, in order.
#include <vector>

#include <torch/types.h>

namespace torch::nn {
class Module;
}

namespace tessera::parallel {

class Communicator;

/// `tensors` on every rank of each group (in order) become those of the group's rank 0; any
/// memory format (a non-contiguous one travels as a contiguous copy).
void broadcast_tensors(const std::vector<torch::Tensor>& tensors, const std::vector<Communicator*>& groups);

/// broadcast_tensors of `module`'s parameters, then of its (defined) buffers.
void broadcast_module(const torch::nn::Module& module, const std::vector<Communicator*>& groups);

/// Every parameter's gradient summed over each group in order (one packed allreduce per
/// group of more than one rank). A parameter without a gradient this step gets zeros first,
/// so every rank packs the same tensors.
void sum_gradients(const std::vector<torch::Tensor>& parameters, const std::vector<Communicator*>& groups);

}  // namespace tessera::parallel
