#include "tessera/parallel/comm/communicator.hpp"

#include <cstdlib>
#include <string>

#include <torch/torch.h>

#include "collective_timeout.hpp"
#include "tessera/core/error.hpp"

namespace tessera::parallel {

namespace {

// Done from the start: what the default (blocking) isend / iallreduce return.
class Completed final : public PendingOperation {
 public:
  bool test() override { return true; }
  void wait() override {}
};

torch::Tensor pack(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return torch::cat(flat);
}

void unpack(const torch::Tensor& packed, const std::vector<torch::Tensor>& tensors) {
  int64_t at = 0;
  for (const auto& t : tensors) {
    t.copy_(packed.narrow(0, at, t.numel()).view_as(t));  // a handle: writes the caller's tensor
    at += t.numel();
  }
}

}  // namespace

std::unique_ptr<PendingOperation> Communicator::isend(const torch::Tensor& t, int destination, int tag) {
  send(t, destination, tag);
  return std::make_unique<Completed>();
}

std::unique_ptr<PendingOperation> Communicator::iallreduce(torch::Tensor& t, ReduceOp op) {
  allreduce(t, op);
  return std::make_unique<Completed>();
}

void allreduce_sum_packed(Communicator& group, const std::vector<torch::Tensor>& tensors) {
  if (group.size() == 1 || tensors.empty()) return;
  torch::Tensor packed = pack(tensors);
  group.allreduce(packed, ReduceOp::kSum);
  unpack(packed, tensors);
}

PackedAllreduce::PackedAllreduce(Communicator& group, std::vector<torch::Tensor> tensors, Precision wire,
                                 torch::Tensor* residual)
    : tensors_(std::move(tensors)) {
  if (group.size() == 1 || tensors_.empty()) {
    finished_ = true;
    return;
  }
  packed_ = pack(tensors_);
  if (wire != Precision::kFp32) {
    TESSERA_CHECK(packed_.scalar_type() == torch::kFloat);
    if (residual) {
      if (!residual->defined() || residual->numel() != packed_.numel()) *residual = torch::zeros_like(packed_);
      packed_.add_(*residual);
    }
    const torch::Tensor wide = packed_;
    packed_ = wide.to(wire == Precision::kBf16 ? torch::kBFloat16 : torch::kHalf);
    if (residual) *residual = wide - packed_.to(torch::kFloat);
  }
  pending_ = group.iallreduce(packed_, ReduceOp::kSum);
}

bool PackedAllreduce::test() { return finished_ || pending_->test(); }

void PackedAllreduce::finish() {
  if (finished_) return;
  pending_->wait();
  unpack(packed_, tensors_);  // copy_ widens a 16-bit wire format
  finished_ = true;
}

double collective_timeout_seconds() {
  if (const char* v = std::getenv("TESSERA_COLLECTIVE_TIMEOUT"); v && *v) {
    try {
      const double s = std::stod(v);
      if (s > 0) return s;
    } catch (...) {
    }
  }
  return 300;
}

}  // namespace tessera::parallel
