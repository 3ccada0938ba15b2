#include "tessera/parallel/communicator.hpp"

#include <torch/torch.h>

namespace tessera::parallel {

void allreduce_sum_packed(Communicator& group, const std::vector<torch::Tensor>& tensors) {
  if (group.size() == 1 || tensors.empty()) return;
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  torch::Tensor packed = torch::cat(flat);
  group.allreduce(packed, ReduceOp::kSum);
  int64_t at = 0;
  for (const auto& t : tensors) {
    t.copy_(packed.narrow(0, at, t.numel()).view_as(t));  // a handle: writes the caller's tensor
    at += t.numel();
  }
}

}  // namespace tessera::parallel
