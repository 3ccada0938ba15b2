#include "tessera/parallel/modes/pipeline.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <optional>

#include "tessera/core/error.hpp"

namespace tessera::parallel {
namespace {

constexpr int kMaxTag = 32767;  // the least MPI_TAG_UB the standard guarantees

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t tensor_bytes(const torch::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

}  // namespace

std::vector<std::vector<PipelineBlock>> pipeline_block_order(int stages, int micro_batches,
                                                             PipelineScheduleKind kind) {
  if (stages < 1) throw Error("pipeline: stages " + std::to_string(stages) + " must be >= 1");
  if (micro_batches < 1) throw Error("pipeline.micro_batches: " + std::to_string(micro_batches) + " must be >= 1");
  const int M = micro_batches;
  std::vector<std::vector<PipelineBlock>> order(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    auto& o = order[static_cast<size_t>(s)];
    auto f = [&](int m) { o.push_back({s, true, m}); };
    auto b = [&](int m) { o.push_back({s, false, m}); };
    if (kind == PipelineScheduleKind::kGPipe) {
      for (int m = 0; m < M; ++m) f(m);
      for (int m = M - 1; m >= 0; --m) b(m);
    } else {
      const int warmup = std::min(stages - s - 1, M);
      for (int m = 0; m < warmup; ++m) f(m);
      for (int i = 0; i < M - warmup; ++i) {
        f(warmup + i);
        b(i);
      }
      for (int m = M - warmup; m < M; ++m) b(m);
    }
  }
  return order;
}

std::vector<PipelineBlock> pipeline_global_order(int stages, int micro_batches, PipelineScheduleKind kind,
                                                const std::function<std::vector<int>(const PipelineBlock&)>& sources) {
  const int K = stages, M = micro_batches;
  auto id = [&](int stage, bool forward, int m) { return (stage * 2 + (forward ? 0 : 1)) * M + m; };
  const auto order = pipeline_block_order(K, M, kind);
  std::vector<double> start(static_cast<size_t>(2 * K * M), -1), finish(start.size(), -1);
  std::vector<size_t> next(static_cast<size_t>(K), 0);
  std::vector<double> free_at(static_cast<size_t>(K), 0);
  for (int placed = 0; placed < 2 * K * M;) {
    bool progress = false;
    for (int s = 0; s < K; ++s) {
      auto& n = next[static_cast<size_t>(s)];
      while (n < order[static_cast<size_t>(s)].size()) {
        const PipelineBlock& b = order[static_cast<size_t>(s)][n];
        double t = free_at[static_cast<size_t>(s)];
        bool ready = true;
        for (int src : sources(b)) {
          const double f = finish[static_cast<size_t>(id(src, b.forward, b.micro_batch))];
          if (f < 0) ready = false;
          t = std::max(t, f);
        }
        if (!ready) break;
        const auto i = static_cast<size_t>(id(s, b.forward, b.micro_batch));
        start[i] = t;
        finish[i] = t + (b.forward ? 1.0 : 2.0);
        free_at[static_cast<size_t>(s)] = finish[i];
        ++n;
        ++placed;
        progress = true;
      }
    }
    TESSERA_CHECK(progress);  // the block orders above respect the data dependencies
  }
  std::vector<PipelineBlock> blocks;
  for (const auto& o : order) blocks.insert(blocks.end(), o.begin(), o.end());
  std::stable_sort(blocks.begin(), blocks.end(), [&](const PipelineBlock& a, const PipelineBlock& b) {
    const double sa = start[static_cast<size_t>(id(a.stage, a.forward, a.micro_batch))];
    const double sb = start[static_cast<size_t>(id(b.stage, b.forward, b.micro_batch))];
    return sa != sb ? sa < sb : a.stage < b.stage;
  });
  return blocks;
}

void PipelineOptions::validate(const LayerSequence& seq) const {
  if (balance.empty()) throw Error("pipeline.balance: needs at least one stage");
  for (size_t s = 0; s < balance.size(); ++s)
    if (balance[s] < 1)
      throw Error("pipeline.balance: stage " + std::to_string(s) + " has " + std::to_string(balance[s]) +
                  " layers; every stage needs at least one");
  const int total = std::accumulate(balance.begin(), balance.end(), 0);
  if (total != seq.size())
    throw Error("pipeline.balance: covers " + std::to_string(total) + " layers, the model has " +
                std::to_string(seq.size()));
  if (micro_batches < 1) throw Error("pipeline.micro_batches: " + std::to_string(micro_batches) + " must be >= 1");
  if (loss.kind != LossKind::kCrossEntropy && loss.kind != LossKind::kFocal)
    throw Error("pipeline.loss.kind: " + loss_kind_name(loss.kind) +
                " does not split over micro-batches exactly; use ce or focal");
  loss.validate(seq.options.classes);
  if (seq.options.norm == Norm::kBatch)
    throw Error("model.norm: batch norm statistics over the whole mini-batch are not implemented for the "
                "pipeline; use group or instance norm");
}

// One thing this rank does, in the global order every rank shares (see the header comment).
struct PipelineTrainer::Event {
  PipelineBlock block;   // the block computed, or the block consuming the message
  bool message = false;
  int source = 0;        // stages (= ranks of the pipeline group)
  int destination = 0;
  int skip = -1;         // -1: the main activation (forward) or its gradient (backward)
  int tag = 0;
};

struct PipelineTrainer::MicroBatch {
  int64_t offset = 0, size = 0;
  bool recompute = false;  // checkpointed: forward without a graph, recomputed before backward
  torch::Tensor target;    // last stage, checkpointed: the labels the recomputed loss needs
  StageTensors in;        // received (leaves needing a gradient), or the network input on stage 0
  StageTensors out;       // sent on, kept for the backward
  StageTensors grad_out;  // gradients of `out`, received from later stages
  torch::Tensor loss;     // last stage: this micro-batch's share of the loss
  torch::Tensor logits;   // last stage, PipelineOptions::keep_output
  double loss_value = 0;
};

PipelineTrainer::PipelineTrainer(const UNetImpl& full, int64_t input_side, Communicator& pipeline,
                                 Communicator& data, PipelineOptions options, const SpatialDecomposition* spatial)
    : pipeline_(pipeline), data_(data), options_(std::move(options)),
      seq_(full.layer_sequence(input_side)), spatial_(spatial), side_(input_side) {
  options_.validate(seq_);
  if (spatial_ != nullptr) {
    if (full.options().padding != Padding::kSame)
      throw Error("--sp: spatial parallelism needs a `same`-padding U-Net (use --padding same)");
    const std::vector<int64_t> sides(size_t(full.options().dims), input_side);
    spatial_->check_halo_fits(sides, unet_alignment(full.options()), (full.options().kernel - 1) / 2);
    block_ = spatial_->block(sides, unet_alignment(full.options()));
  }
  stage_index_ = pipeline_.rank();
  if (pipeline_.size() != stages())
    throw Error("pipeline stage " + std::to_string(stage_index_) + ": the pipeline group has " +
                std::to_string(pipeline_.size()) + " ranks but pipeline.balance has " + std::to_string(stages()) +
                " stages");
  int first = 0;
  for (int s = 0; s < stages(); ++s) {
    for (int i = 0; i < options_.balance[static_cast<size_t>(s)]; ++i) stage_of_layer_.push_back(s);
    if (s < stage_index_) first += options_.balance[static_cast<size_t>(s)];
  }
  stage_ = UNetStage(full, seq_, first, first + options_.balance[static_cast<size_t>(stage_index_)] - 1);
  build_events();
}

PipelineTrainer::~PipelineTrainer() = default;

// Messages a block waits for: (source stage, skip) pairs, main first, then skips ascending.
std::vector<std::pair<int, int>> PipelineTrainer::block_inputs(const PipelineBlock& b) const {
  const int K = stages(), E = static_cast<int>(seq_.skips.size());
  auto producer_stage = [&](int e) { return stage_of_layer_[static_cast<size_t>(seq_.skips[static_cast<size_t>(e)].producer)]; };
  auto consumer_stage = [&](int e) { return stage_of_layer_[static_cast<size_t>(seq_.skips[static_cast<size_t>(e)].consumer)]; };
  std::vector<std::pair<int, int>> in;
  if (b.forward) {
    if (b.stage > 0) in.emplace_back(b.stage - 1, -1);
    for (int e = 0; e < E; ++e)
      if (consumer_stage(e) == b.stage && producer_stage(e) < b.stage) in.emplace_back(producer_stage(e), e);
  } else {
    if (b.stage < K - 1) in.emplace_back(b.stage + 1, -1);
    for (int e = 0; e < E; ++e)
      if (producer_stage(e) == b.stage && consumer_stage(e) > b.stage) in.emplace_back(consumer_stage(e), e);
  }
  return in;
}

std::vector<PipelineBlock> PipelineTrainer::scheduled_blocks() const {
  return pipeline_global_order(stages(), options_.micro_batches, options_.schedule, [this](const PipelineBlock& b) {
    std::vector<int> sources;
    for (const auto& [src, skip] : block_inputs(b)) sources.push_back(src);
    return sources;
  });
}

void PipelineTrainer::build_events() {
  const int E = static_cast<int>(seq_.skips.size());
  const auto inputs = [this](const PipelineBlock& b) { return block_inputs(b); };
  const std::vector<PipelineBlock> blocks = scheduled_blocks();
  // Every rank walks the same global sequence and keeps the events it takes part in. A
  // receive waits just before the block that consumes it; a send leaves right after the
  // block that produced it (the forward, or backward, of the same micro-batch on this
  // stage): sends are non-blocking, so the stage computes on while the tensor travels and
  // the receiver never waits for the sender's next block.
  const int me = stage_index_;
  auto message = [&](const PipelineBlock& b, int src, int skip) {
    Event ev;
    ev.block = b;
    ev.message = true;
    ev.source = src;
    ev.destination = b.stage;
    ev.skip = skip;
    ev.tag = ((b.micro_batch * 2 + (b.forward ? 0 : 1)) * (E + 1) + (skip + 1)) % kMaxTag;
    return ev;
  };
  std::map<std::pair<bool, int>, std::vector<Event>> sends_after;  // (forward, micro-batch) of my block → its sends
  for (const PipelineBlock& b : blocks)
    for (const auto& [src, skip] : inputs(b))
      if (src == me && b.stage != me) sends_after[{b.forward, b.micro_batch}].push_back(message(b, src, skip));
  for (const PipelineBlock& b : blocks) {
    if (b.stage != me) continue;
    for (const auto& [src, skip] : inputs(b))
      if (src != me) events_.push_back(message(b, src, skip));
    Event ev;
    ev.block = b;
    events_.push_back(ev);
    for (const Event& send : sends_after[{b.forward, b.micro_batch}]) events_.push_back(send);
  }
}

void PipelineTrainer::forward(MicroBatch& mb, const torch::Tensor& input, const torch::Tensor& target,
                              const torch::Tensor& w_total) {
  if (stage_index_ == 0) mb.in.main = input.narrow(0, mb.offset, mb.size);
  std::optional<torch::NoGradGuard> no_graph;
  if (mb.recompute) no_graph.emplace();
  StageTensors out = stage_->forward(mb.in);
  if (stage_index_ < stages() - 1) {
    mb.out = std::move(out);
    return;
  }
  mb.target = target.narrow(0, mb.offset, mb.size);
  if (options_.keep_output) mb.logits = out.main.detach();
  mb.loss = micro_batch_loss(out.main, mb.target, w_total);
  mb.loss_value = mb.loss.item<double>();
}

torch::Tensor PipelineTrainer::micro_batch_loss(const torch::Tensor& logits, const torch::Tensor& target,
                                                const torch::Tensor& w_total) const {
  const LossOptions& lo = options_.loss;
  const auto stats = loss_statistics(logits, target, lo);
  // Normalised by the global batch's W (labels only), so the micro-batch shares add up exactly.
  const auto shared = torch::cat({w_total.to(stats.scalar_type()), stats.narrow(0, 1, stats.numel() - 1)});
  return loss_from_statistics(shared, lo, logits.size(1));
}

void PipelineTrainer::backward(MicroBatch& mb, const torch::Tensor& w_total) {
  if (mb.recompute) {  // the same operations on the same inputs: the same values, now with a graph
    StageTensors out = stage_->forward(mb.in);
    if (stage_index_ == stages() - 1)
      mb.loss = micro_batch_loss(out.main, mb.target, w_total);
    else
      mb.out = std::move(out);
  }
  if (stage_index_ == stages() - 1) {
    torch::autograd::backward({mb.loss});
    mb.loss = torch::Tensor();
    return;
  }
  std::vector<torch::Tensor> outputs{mb.out.main}, grads{mb.grad_out.main};
  for (int e : stage_->skips_out()) {
    outputs.push_back(mb.out.skips.at(e));
    grads.push_back(mb.grad_out.skips.at(e));
  }
  torch::autograd::backward(outputs, grads);
  mb.out = {};
  mb.grad_out = {};
}

void PipelineTrainer::reduce_gradients() {
  std::vector<torch::Tensor> grads;
  for (auto& p : stage_->parameters()) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  allreduce_sum_packed(data_, grads);
  if (spatial_ != nullptr) allreduce_sum_packed(spatial_->group(), grads);
}

std::vector<int64_t> PipelineTrainer::block_shape(std::vector<int64_t> shape) const {
  // `same` padding: a layer's side is the tile's over 2^level, a block's its extent over 2^level.
  if (spatial_ != nullptr)
    for (size_t a = 0; a < block_.extent.size(); ++a) shape[2 + a] = shape[2 + a] * block_.extent[a] / side_;
  return shape;
}

void PipelineTrainer::sum_over_replicas_and_blocks(torch::Tensor& t) {
  data_.allreduce(t, ReduceOp::kSum);
  if (spatial_ != nullptr) spatial_->group().allreduce(t, ReduceOp::kSum);
}

std::vector<PipelineTrainer::MicroBatch> PipelineTrainer::split_batch(const torch::Tensor& input, const std::string& where) {
  const int M = options_.micro_batches;
  // The local batch size, known to stage 0, decides every micro-batch's shape.
  torch::Tensor n = torch::zeros({1}, torch::kInt64);
  if (stage_index_ == 0) {
    if (!input.defined()) throw Error(where + "input: stage 0 needs the mini-batch");
    n[0] = input.size(0);
  }
  pipeline_.broadcast(n, 0);
  const int64_t N = n.item<int64_t>();
  if (N < M)
    throw Error(where + "pipeline.micro_batches: " + std::to_string(M) + " micro-batches need at least as many samples, the batch has " +
                std::to_string(N));
  std::vector<MicroBatch> mbs(static_cast<size_t>(M));
  for (int m = 0, at = 0; m < M; ++m) {
    auto& mb = mbs[static_cast<size_t>(m)];
    mb.offset = at;
    mb.size = N / M + (m < N % M ? 1 : 0);
    mb.recompute = options_.checkpoint == ActivationCheckpoint::kAlways ||
                   (options_.checkpoint == ActivationCheckpoint::kExceptLast && m != M - 1);
    at += static_cast<int>(mb.size);
  }
  return mbs;
}

void PipelineTrainer::send(const Event& ev, MicroBatch& mb, std::vector<std::unique_ptr<PendingOperation>>& sends) {
  const bool forward_message = ev.block.forward;
  torch::Tensor t;
  if (forward_message) {
    t = ev.skip < 0 ? mb.out.main : mb.out.skips.at(ev.skip);
  } else {
    const torch::Tensor& leaf = ev.skip < 0 ? mb.in.main : mb.in.skips.at(ev.skip);
    t = leaf.grad().defined() ? leaf.grad() : torch::zeros_like(leaf);
  }
  t = t.detach().contiguous();
  // Non-blocking: this stage goes on computing while the tensor travels (the operation
  // keeps it alive); completed sends are dropped after each event, the rest waited for
  // at the end of the step.
  sends.push_back(pipeline_.isend(t, ev.destination, ev.tag));
  stats_.bytes_sent += tensor_bytes(t);
  if (forward_message && mb.recompute) {  // recomputed before the backward: not kept meanwhile
    if (ev.skip < 0)
      mb.out.main = torch::Tensor();
    else
      mb.out.skips.erase(ev.skip);
  }
  if (!forward_message) {  // its gradient is out: the received tensor is no longer needed
    if (ev.skip < 0)
      mb.in.main = torch::Tensor();
    else
      mb.in.skips.erase(ev.skip);
  }
}

void PipelineTrainer::receive(const Event& ev, MicroBatch& mb) {
  const bool forward_message = ev.block.forward;
  std::vector<int64_t> shape;
  if (forward_message)
    shape = ev.skip < 0 ? stage_->input_shape(mb.size) : stage_->skip_shape(ev.skip, mb.size);
  else
    shape = ev.skip < 0 ? stage_->output_shape(mb.size) : stage_->skip_shape(ev.skip, mb.size);
  torch::Tensor t = torch::empty(block_shape(shape), torch::kFloat32);
  pipeline_.recv(t, ev.source, ev.tag);
  stats_.bytes_received += tensor_bytes(t);
  if (forward_message) {
    t.requires_grad_(true);
    (ev.skip < 0 ? mb.in.main : mb.in.skips[ev.skip]) = t;
  } else {
    (ev.skip < 0 ? mb.grad_out.main : mb.grad_out.skips[ev.skip]) = t;
  }
}

double PipelineTrainer::step_loss(const std::vector<MicroBatch>& mbs) {
  const int K = stages();
  torch::Tensor loss = torch::zeros({1}, torch::kFloat64);
  if (stage_index_ == K - 1) {
    double sum = 0;
    for (const auto& mb : mbs) sum += mb.loss_value;
    loss[0] = sum;
    sum_over_replicas_and_blocks(loss);
  }
  pipeline_.broadcast(loss, K - 1);
  return loss.item<double>();
}

double PipelineTrainer::train_step(const torch::Tensor& input, const torch::Tensor& target) {
  const double t0 = now_seconds();
  stats_ = {};
  const int K = stages(), me = stage_index_;
  const bool last = me == K - 1;
  const std::string where = "pipeline stage " + std::to_string(me) + ": ";
  std::vector<MicroBatch> mbs = split_batch(input, where);
  const int64_t N = mbs.back().offset + mbs.back().size;

  for (auto& p : stage_->parameters())
    if (p.grad().defined()) p.mutable_grad().zero_();

  torch::Tensor w_total;
  if (last) {
    if (!target.defined() || target.dim() < 1 || target.size(0) != N)
      throw Error(where + "target: the last stage needs the mini-batch's " + std::to_string(N) + " label tiles");
    w_total = torch::tensor({weighted_label_count(target, options_.loss, seq_.options.classes)}, torch::kFloat64);
    sum_over_replicas_and_blocks(w_total);
  }

  int in_flight = 0, graphs = 0;
  auto bytes_of = [](const torch::Tensor& t) {
    if (!t.defined()) return int64_t{0};
    return tensor_bytes(t) + (t.grad().defined() ? tensor_bytes(t.grad()) : 0);
  };
  auto note_received_bytes_held = [&] {
    int64_t held = 0;
    for (const auto& mb : mbs) {
      held += (stage_index_ > 0 ? bytes_of(mb.in.main) : 0) + bytes_of(mb.grad_out.main);
      for (const auto& [e, t] : mb.in.skips) held += bytes_of(t);
      for (const auto& [e, t] : mb.grad_out.skips) held += bytes_of(t);
    }
    stats_.max_received_bytes_held = std::max(stats_.max_received_bytes_held, held);
  };
  std::vector<std::unique_ptr<PendingOperation>> sends;
  std::optional<DecompositionScope> scope;  // every forward, recomputation and backward of the stage
  if (spatial_ != nullptr) scope.emplace(*spatial_);
  for (const Event& ev : events_) {
    std::erase_if(sends, [](const std::unique_ptr<PendingOperation>& op) { return op->test(); });
    MicroBatch& mb = mbs[static_cast<size_t>(ev.block.micro_batch)];
    if (ev.message) {
      if (ev.source == me) send(ev, mb, sends);
      else receive(ev, mb);
      continue;
    }
    const double c0 = now_seconds();
    if (ev.block.forward) {
      forward(mb, input, target, w_total);
      stats_.max_in_flight = std::max(stats_.max_in_flight, ++in_flight);
      if (!mb.recompute) stats_.max_graphs_held = std::max(stats_.max_graphs_held, ++graphs);
    } else {
      if (mb.recompute) stats_.max_graphs_held = std::max(stats_.max_graphs_held, ++graphs);
      backward(mb, w_total);
      --in_flight;
      --graphs;
    }
    stats_.compute_seconds += now_seconds() - c0;
    note_received_bytes_held();
  }
  for (auto& op : sends) op->wait();
  sends.clear();
  scope.reset();
  output_ = torch::Tensor();
  if (options_.keep_output && last) {
    std::vector<torch::Tensor> logits;
    for (const auto& mb : mbs) logits.push_back(mb.logits);
    output_ = torch::cat(logits);
  }

  const double loss = step_loss(mbs);
  reduce_gradients();
  stats_.seconds = now_seconds() - t0;
  return loss;
}

}  // namespace tessera::parallel
