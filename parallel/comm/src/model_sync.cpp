#include "tessera/parallel/comm/model_sync.hpp"

#include <torch/nn/module.h>
#include <torch/torch.h>

#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {

void broadcast_tensors(const std::vector<torch::Tensor>& tensors, const std::vector<Communicator*>& groups) {
  torch::NoGradGuard no_grad;
  for (Communicator* group : groups) {
    if (group->size() == 1) continue;
    for (torch::Tensor t : tensors) {
      if (!t.defined()) continue;
      if (t.is_contiguous()) {
        group->broadcast(t, 0);
        continue;
      }
      // Channels-last weights (what `tessera train` saves by default) travel as a contiguous
      // copy; every rank then writes root's values back in its own layout.
      torch::Tensor packed = t.contiguous();
      group->broadcast(packed, 0);
      t.copy_(packed);
    }
  }
}

void broadcast_module(const torch::nn::Module& module, const std::vector<Communicator*>& groups) {
  broadcast_tensors(module.parameters(), groups);
  broadcast_tensors(module.buffers(), groups);
}

void sum_gradients(const std::vector<torch::Tensor>& parameters, const std::vector<Communicator*>& groups) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  grads.reserve(parameters.size());
  for (torch::Tensor p : parameters) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  for (Communicator* group : groups)
    if (group->size() > 1) allreduce_sum_packed(*group, grads);
}

}  // namespace tessera::parallel
