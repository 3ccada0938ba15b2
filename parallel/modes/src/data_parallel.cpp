#include "tessera/parallel/modes/data_parallel.hpp"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/model_sync.hpp"

namespace tessera::parallel {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The parameters that take part, in the order backward finishes them (reverse definition
// order), and their buckets: consecutive runs of one dtype of at most `fusion_bytes` (the
// first at most `first_bytes`; a larger parameter alone). Every replica computes the same buckets.
std::vector<torch::Tensor> reduced_parameters(UNet& net) {
  std::vector<torch::Tensor> params;
  for (auto& p : net->parameters())
    if (p.requires_grad()) params.push_back(p);
  std::reverse(params.begin(), params.end());
  return params;
}

std::vector<std::vector<int>> make_buckets(const std::vector<torch::Tensor>& params, int64_t fusion_bytes,
                                          int64_t first_bytes) {
  std::vector<std::vector<int>> buckets;
  size_t i = 0;
  while (i < params.size()) {
    std::vector<int> bucket;
    int64_t bytes = 0;
    const auto dtype = params[i].scalar_type();
    const int64_t bound = buckets.empty() ? std::min(first_bytes, fusion_bytes) : fusion_bytes;
    while (i < params.size() && params[i].scalar_type() == dtype &&
           (bucket.empty() || bytes + params[i].numel() * int64_t(params[i].element_size()) <= bound)) {
      bytes += params[i].numel() * int64_t(params[i].element_size());
      bucket.push_back(static_cast<int>(i++));
    }
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

int64_t bucket_bytes(const std::vector<torch::Tensor>& params, const std::vector<int>& bucket) {
  int64_t bytes = 0;
  for (int j : bucket) bytes += params[size_t(j)].numel() * int64_t(params[size_t(j)].element_size());
  return bytes;
}

// The gradients of a bucket; a parameter without one this step takes part as zeros, so every
// replica packs the same buffer.
std::vector<torch::Tensor> bucket_gradients(const std::vector<torch::Tensor>& params, const std::vector<int>& bucket) {
  std::vector<torch::Tensor> grads;
  for (int j : bucket) {
    torch::Tensor p = params[size_t(j)];
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  return grads;
}

// Length of the union of intervals, and of its part before `until`.
std::pair<double, double> union_lengths(std::vector<std::pair<double, double>> spans, double until) {
  std::sort(spans.begin(), spans.end());
  double total = 0, before = 0, cur_lo = 0, cur_hi = -1;
  auto close = [&] {
    if (cur_hi < cur_lo) return;
    total += cur_hi - cur_lo;
    before += std::max(0.0, std::min(cur_hi, until) - cur_lo);
  };
  for (const auto& [lo, hi] : spans) {
    if (lo > cur_hi) {
      close();
      cur_lo = lo;
      cur_hi = hi;
    } else {
      cur_hi = std::max(cur_hi, hi);
    }
  }
  close();
  return {total, before};
}

// Runs `ready(i)` after AccumulateGrad has written parameter i's gradient.
class ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::function<void(int)> ready, int i) : ready_(std::move(ready)), i_(i) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    ready_(i_);
    return outputs;
  }

 private:
  std::function<void(int)> ready_;
  int i_;
};

}  // namespace

struct DataParallelHooks::Overlap {
  struct Bucket {
    std::vector<int> params;
    int64_t bytes = 0;
    int ready = 0;
    std::unique_ptr<PackedAllreduce> op;
    double posted = 0, arrived = -1;
  };
  std::vector<torch::Tensor> params;
  std::vector<int> bucket_of;
  std::vector<Bucket> buckets;
  std::vector<char> ready;
  // The accumulators carry the hooks; holding them keeps the same nodes across steps.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<uintptr_t> keys;
  bool armed = false;
  size_t next = 0;  // the first bucket not yet posted

  void post(Communicator& data, size_t k, Precision wire, torch::Tensor* residual) {
    Bucket& b = buckets[k];
    b.op = std::make_unique<PackedAllreduce>(data, bucket_gradients(params, b.params), wire, residual);
    b.posted = now_seconds();
    b.arrived = -1;
  }
  // Lets the posted allreduces progress; notes the ones that arrived.
  void poll() {
    for (size_t k = 0; k < next; ++k)
      if (buckets[k].arrived < 0 && buckets[k].op->test()) buckets[k].arrived = now_seconds();
  }
  ~Overlap() {
    for (size_t i = 0; i < accumulators.size(); ++i) accumulators[i]->del_post_hook(keys[i]);
  }
};

void DataParallelOptions::validate() const {
  if (fusion_bytes < 1) throw Error("fusion_bytes: must be >= 1 byte");
  if (first_bucket_bytes < 1) throw Error("first_bucket_bytes: must be >= 1 byte");
}

DataParallelHooks::DataParallelHooks(Communicator& data, DataParallelOptions options)
    : data_(data), options_(options) {
  options_.validate();
}

DataParallelHooks::~DataParallelHooks() = default;

void DataParallelHooks::on_start(UNet& net) { broadcast_module(*net, {&data_}); }

void DataParallelHooks::sum(torch::Tensor& t) { data_.allreduce(t, ReduceOp::kSum); }

void DataParallelHooks::before_backward(UNet& net, bool last) {
  if (!last || !options_.overlap || data_.size() == 1) return;
  if (!overlap_) {
    overlap_ = std::make_unique<Overlap>();
    Overlap& o = *overlap_;
    o.params = reduced_parameters(net);
    o.bucket_of.assign(o.params.size(), 0);
    for (auto& ids : make_buckets(o.params, options_.fusion_bytes, options_.first_bucket_bytes)) {
      Overlap::Bucket b;
      b.params = ids;
      b.bytes = bucket_bytes(o.params, ids);
      for (int j : ids) o.bucket_of[size_t(j)] = static_cast<int>(o.buckets.size());
      o.buckets.push_back(std::move(b));
    }
    auto ready = [this](int i) {
      Overlap& ov = *overlap_;
      if (!ov.armed || ov.ready[size_t(i)]) return;
      ov.ready[size_t(i)] = 1;
      ++ov.buckets[size_t(ov.bucket_of[size_t(i)])].ready;
      // Strictly in bucket order: every replica posts the same collectives in the same order.
      while (ov.next < ov.buckets.size() &&
             ov.buckets[ov.next].ready == static_cast<int>(ov.buckets[ov.next].params.size()))
        post_next(ov);
      ov.poll();
    };
    for (size_t i = 0; i < o.params.size(); ++i) {
      o.accumulators.push_back(torch::autograd::impl::grad_accumulator(o.params[i]));
      o.keys.push_back(o.accumulators.back()->add_post_hook(std::make_unique<ReadyHook>(ready, static_cast<int>(i))));
    }
  }
  Overlap& o = *overlap_;
  o.ready.assign(o.params.size(), 0);
  for (auto& b : o.buckets) {
    b.ready = 0;
    b.op.reset();
  }
  o.next = 0;
  o.armed = true;
}

torch::Tensor* DataParallelHooks::residual(size_t k) {
  if (options_.compression == Precision::kFp32 || !options_.error_feedback) return nullptr;
  if (residuals_.size() <= k) residuals_.resize(k + 1);
  return &residuals_[k];
}

void DataParallelHooks::post_next(Overlap& o) {
  o.post(data_, o.next, options_.compression, residual(o.next));
  ++o.next;
}

void DataParallelHooks::reduce_blocking(UNet& net) {
  const double start = now_seconds();
  const std::vector<torch::Tensor> params = reduced_parameters(net);
  StepCommunication step;
  const std::vector<std::vector<int>> buckets = make_buckets(params, options_.fusion_bytes, options_.first_bucket_bytes);
  for (size_t k = 0; k < buckets.size(); ++k) {
    const std::vector<int>& bucket = buckets[k];
    PackedAllreduce(data_, bucket_gradients(params, bucket), options_.compression, residual(k)).finish();
    ++buckets_;
    ++step.buckets;
    bytes_ += bucket_bytes(params, bucket);
  }
  step.busy_s = step.exposed_s = now_seconds() - start;
  last_ = step;
}

void DataParallelHooks::on_gradients(UNet& net) {
  if (data_.size() == 1) return;
  torch::NoGradGuard no_grad;
  if (!overlap_ || !overlap_->armed) return reduce_blocking(net);
  Overlap& o = *overlap_;
  o.armed = false;
  const double backward_end = now_seconds();
  o.poll();
  const size_t posted_during_backward = o.next;
  overlapped_ += static_cast<int64_t>(posted_during_backward);
  while (o.next < o.buckets.size()) post_next(o);  // parameters no backward reached
  std::vector<std::pair<double, double>> spans;
  for (auto& b : o.buckets) {
    b.op->finish();
    if (b.arrived < 0) b.arrived = now_seconds();
    spans.emplace_back(b.posted, b.arrived);
    ++buckets_;
    bytes_ += b.bytes;
  }
  const auto [busy, hidden] = union_lengths(spans, backward_end);
  StepCommunication step;
  step.buckets = static_cast<int>(o.buckets.size());
  step.overlapped = static_cast<int>(posted_during_backward);
  step.busy_s = busy;
  step.hidden_s = hidden;
  step.exposed_s = now_seconds() - backward_end;
  last_ = step;
  timeline_.steps += 1;
  timeline_.busy_seconds += busy;
  timeline_.hidden_seconds += hidden;
  timeline_.exposed_seconds += step.exposed_s;
}

void DataParallelHooks::on_step(int64_t step, double loss) {
  if (step_callback_) step_callback_(step, loss);
}

}  // namespace tessera::parallel
