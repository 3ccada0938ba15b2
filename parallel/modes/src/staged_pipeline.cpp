#include "tessera/parallel/modes/staged_pipeline.hpp"

#include <torch/torch.h>

#include <numeric>
#include <optional>

#include "tessera/core/error.hpp"
#include "tessera/parallel/modes/pipeline.hpp"

namespace tessera::parallel {
namespace {

constexpr int kMaxTag = 32767;     // the least MPI_TAG_UB the standard guarantees
constexpr int64_t kHeader = 256;   // int64 entries: count, then per tensor its rank and sizes

int tag_of(int micro_batch, bool forward) { return (micro_batch * 2 + (forward ? 0 : 1)) % kMaxTag; }

// The gradients a bundle's leaves received (zeros where none reached them).
TensorBundle leaf_gradients(const TensorBundle& leaves) {
  TensorBundle grads;
  for (const torch::Tensor& t : leaves) grads.push_back(t.grad().defined() ? t.grad() : torch::zeros_like(t));
  return grads;
}

}  // namespace

struct StagedPipeline::MicroBatch {
  bool recompute = false;  // checkpointed: forward without a graph, again before the backward
  TensorBundle in;         // received (leaves needing a gradient); empty on stage 0
  TensorBundle out;        // sent on, kept for the backward (not when recomputed)
  torch::Tensor loss;      // last stage: the share to backward
};

StagedPipeline::StagedPipeline(Communicator& pipeline, std::vector<int> balance, PipelineScheduleKind schedule,
                               ActivationCheckpoint checkpoint)
    : pipeline_(pipeline), balance_(std::move(balance)), schedule_(schedule), checkpoint_(checkpoint) {
  if (pipeline_.size() != stages())
    throw Error("pipeline: the group has " + std::to_string(pipeline_.size()) + " ranks but the balance has " +
                std::to_string(stages()) + " stages");
  for (int s = 0; s < stages(); ++s) TESSERA_CHECK(balance_[size_t(s)] >= 1);
  first_ = std::accumulate(balance_.begin(), balance_.begin() + pipeline_.rank(), 0);
  last_ = first_ + balance_[size_t(pipeline_.rank())] - 1;
}

void StagedPipeline::send(const TensorBundle& bundle, int destination, int tag) {
  torch::Tensor header = torch::zeros({kHeader}, torch::kInt64);
  int64_t at = 0;
  header[at++] = int64_t(bundle.size());
  for (const torch::Tensor& t : bundle) {
    TESSERA_CHECK(t.scalar_type() == torch::kFloat && at + 1 + t.dim() <= kHeader);
    header[at++] = t.dim();
    for (int64_t size : t.sizes()) header[at++] = size;
  }
  sends_.push_back(pipeline_.isend(header, destination, tag));
  for (const torch::Tensor& t : bundle) sends_.push_back(pipeline_.isend(t.detach().contiguous(), destination, tag));
}

TensorBundle StagedPipeline::receive(int source, int tag) {
  torch::Tensor header = torch::empty({kHeader}, torch::kInt64);
  pipeline_.recv(header, source, tag);
  const auto h = header.accessor<int64_t, 1>();
  TensorBundle bundle;
  for (int64_t i = 0, at = 1; i < h[0]; ++i) {
    std::vector<int64_t> shape(size_t(h[at]));
    for (size_t a = 0; a < shape.size(); ++a) shape[a] = h[at + 1 + int64_t(a)];
    at += 1 + int64_t(shape.size());
    torch::Tensor t = torch::empty(shape, torch::kFloat);
    pipeline_.recv(t, source, tag);
    bundle.push_back(t);
  }
  return bundle;
}

// This stage's layers of micro-batch m; without a graph when checkpointed.
void StagedPipeline::forward(StagedWork& work, MicroBatch& mb, int m) {
  const int me = pipeline_.rank(), last_layer = work.layers() - 1;
  if (me > 0) {
    mb.in = receive(me - 1, tag_of(m, true));
    for (auto& t : mb.in) t.requires_grad_(true);
  }
  std::optional<torch::NoGradGuard> no_graph;
  if (mb.recompute) no_graph.emplace();
  const int upto = std::min(last_, last_layer - 1);
  TensorBundle out = first_ <= upto ? work.forward(m, first_, upto, mb.in) : mb.in;
  if (last_ == last_layer) {
    mb.loss = work.finish(m, std::move(out), /*report=*/true);
    if (mb.recompute) mb.loss = torch::Tensor();
    return;
  }
  send(out, me + 1, tag_of(m, true));
  if (!mb.recompute) mb.out = std::move(out);
}

void StagedPipeline::backward(StagedWork& work, MicroBatch& mb, int m) {
  const int me = pipeline_.rank(), last_layer = work.layers() - 1;
  if (mb.recompute) {  // the same operations on the same inputs: the same values, now with a graph
    const int upto = std::min(last_, last_layer - 1);
    TensorBundle out = first_ <= upto ? work.forward(m, first_, upto, mb.in) : mb.in;
    if (last_ == last_layer)
      mb.loss = work.finish(m, std::move(out), /*report=*/false);
    else
      mb.out = std::move(out);
  }
  if (last_ == last_layer) {
    torch::autograd::backward({mb.loss});
  } else {
    const TensorBundle grads = receive(me + 1, tag_of(m, false));
    TESSERA_CHECK(grads.size() == mb.out.size());
    std::vector<torch::Tensor> outputs, incoming;
    for (size_t i = 0; i < grads.size(); ++i)
      if (mb.out[i].requires_grad()) {
        outputs.push_back(mb.out[i]);
        incoming.push_back(grads[i]);
      }
    if (!outputs.empty()) torch::autograd::backward(outputs, incoming);
  }
  if (me > 0) send(leaf_gradients(mb.in), me - 1, tag_of(m, false));
  mb = MicroBatch{};
}

void StagedPipeline::run(StagedWork& work) {
  const int K = stages(), M = work.micro_batches(), me = pipeline_.rank();
  TESSERA_CHECK(std::accumulate(balance_.begin(), balance_.end(), 0) == work.layers() && M >= 1);
  std::vector<MicroBatch> mbs(static_cast<size_t>(M));
  for (int m = 0; m < M; ++m)
    mbs[size_t(m)].recompute = checkpoint_ == ActivationCheckpoint::kAlways ||
                               (checkpoint_ == ActivationCheckpoint::kExceptLast && m != M - 1);
  const auto chain = [K](const PipelineBlock& b) {
    if (b.forward) return b.stage > 0 ? std::vector<int>{b.stage - 1} : std::vector<int>{};
    return b.stage < K - 1 ? std::vector<int>{b.stage + 1} : std::vector<int>{};
  };
  for (const PipelineBlock& b : pipeline_global_order(K, M, schedule_, chain)) {
    if (b.stage != me) continue;
    std::erase_if(sends_, [](const std::unique_ptr<PendingOperation>& op) { return op->test(); });
    MicroBatch& mb = mbs[size_t(b.micro_batch)];
    if (b.forward)
      forward(work, mb, b.micro_batch);
    else
      backward(work, mb, b.micro_batch);
  }
  for (auto& op : sends_) op->wait();
  sends_.clear();
  pipeline_.broadcast(work.report(), K - 1);
}

}  // namespace tessera::parallel
