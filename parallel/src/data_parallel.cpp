#include "tessera/parallel/data_parallel.hpp"

#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera::parallel {

void DataParallelOptions::validate() const {
  if (fusion_bytes < 1) throw Error("fusion_bytes: must be >= 1 byte");
}

DataParallelHooks::DataParallelHooks(Communicator& data, DataParallelOptions options)
    : data_(data), options_(options) {
  options_.validate();
}

void DataParallelHooks::on_start(UNet& net) {
  torch::NoGradGuard no_grad;
  for (auto& p : net->parameters()) data_.broadcast(p, 0);
  for (auto& b : net->buffers())
    if (b.defined()) data_.broadcast(b, 0);
}

void DataParallelHooks::sum(torch::Tensor& t) { data_.allreduce(t, ReduceOp::kSum); }

void DataParallelHooks::on_gradients(UNet& net) {
  if (data_.size() == 1) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params;
  for (auto& p : net->parameters())
    if (p.requires_grad()) {
      // A parameter without a gradient this step still takes part, so every replica packs
      // the same buckets.
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      params.push_back(p);
    }
  std::reverse(params.begin(), params.end());
  size_t i = 0;
  while (i < params.size()) {
    std::vector<torch::Tensor> bucket;
    int64_t bytes = 0;
    const auto dtype = params[i].scalar_type();
    while (i < params.size() && params[i].scalar_type() == dtype &&
           (bucket.empty() || bytes + params[i].numel() * int64_t(params[i].element_size()) <= options_.fusion_bytes)) {
      bytes += params[i].numel() * int64_t(params[i].element_size());
      bucket.push_back(params[i++]);
    }
    std::vector<torch::Tensor> grads;
    for (auto& p : bucket) grads.push_back(p.grad());
    allreduce_sum_packed(data_, grads);
    ++buckets_;
    bytes_ += bytes;
  }
}

void DataParallelHooks::on_step(int64_t step, double loss) {
  if (step_callback_) step_callback_(step, loss);
}

}  // namespace tessera::parallel
