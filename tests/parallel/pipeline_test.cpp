// Pipeline parallelism reproduces one process: a U-Net cut into K stages (skips crossing
// stages, some over a stage in between), its mini-batch in M micro-batches, GPipe or 1F1B,
// gives the loss and every parameter gradient of the uncut model on the whole batch
// (max relative difference <= 1e-5); dp × pp replicas give those of the global batch.
//
// Why these comparisons can fail: a skip routed to the wrong concatenation has another
// channel count (4/8/16 here) and fails the receiver's shape check; a skip that were not
// sent, or sent without its gradient coming back, changes the decoder's first convolution
// gradients (their first half of input channels multiply the skip) or the encoder's (which
// get part of their gradient only through the skip); a micro-batch left out or counted twice
// changes every gradient — ComparisonDetectsAMissingMicroBatch shows the check sees that.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <map>
#include <regex>

#include "tessera/core/error.hpp"
#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/losses.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/core/unet_stages.hpp"
#include "tessera/parallel/modes/pipeline.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"
#include "tessera/parallel/comm/process_grid.hpp"
#include "tessera/parallel/comm/runtime.hpp"

namespace tessera::parallel {
namespace {

using Schedule = PipelineScheduleKind;

UNetOptions tiny(Norm norm) {
  return unet_preset("unet-tiny").with_in_channels(2).with_classes(3).with_base_filters(4).with_norm(norm);
}

// The smallest valid input side with an output of at least 4 pixels per axis.
int64_t small_side(const UNetOptions& o) {
  for (int64_t side = 8; side < 1000; ++side) {
    const auto out = unet_output_size(o, side);
    if (out && *out >= 4) return side;
  }
  ADD_FAILURE() << "no valid side";
  return 0;
}

struct Batch {
  torch::Tensor input, target;
};

// The same batch on every rank (fixed seed): random input, random labels, ~20 % unlabelled.
Batch make_batch(const UNetOptions& o, int64_t side, int64_t n, uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t out = *unet_output_size(o, side);
  Batch b;
  b.input = torch::randn({n, o.in_channels, side, side});
  b.target = torch::randint(0, o.classes, {n, out, out}, torch::kInt64);
  b.target.masked_fill_(torch::rand({n, out, out}) < 0.2, -100);
  return b;
}

struct Reference {
  double loss = 0;
  std::map<std::string, torch::Tensor> grads;
  // Per parameter: max over elements of Σ_s |∂loss_s/∂θ|, loss_s = sample s's share of the
  // loss. A pipeline adds the micro-batches' gradients in its schedule's order, so it differs
  // from one process by rounding relative to the terms it adds, not to their sum, which
  // cancels to a fraction of them in some parameters (a group norm's weights).
  std::map<std::string, double> magnitude;
};

// One process, whole batch: the uncut model's forward, loss and backward; then each sample's
// share of the loss (cross-entropy or focal: its class-weighted sum over pixels divided by the
// whole batch's class-weighted pixel count, so the shares add up to the loss) for
// Reference::magnitude.
Reference single_process(UNet& net, const Batch& b, const LossOptions& lo) {
  EXPECT_TRUE(lo.kind == LossKind::kCrossEntropy || lo.kind == LossKind::kFocal)
      << "sample shares are worked out for losses that are a sum over pixels (cross-entropy, focal)";
  net->zero_grad();
  const auto logits = net->forward(b.input);
  const auto loss = segmentation_loss(logits, b.target, lo);
  loss.backward();
  Reference r;
  r.loss = loss.item<double>();
  for (const auto& p : net->named_parameters()) r.grads[p.key()] = p.value().grad().clone();

  const int64_t classes = logits.size(1);
  const torch::Tensor batch_weight = loss_statistics(logits.detach(), b.target, lo).narrow(0, 0, 1);
  std::map<std::string, torch::Tensor> sum_abs;
  for (int64_t i = 0; i < b.input.size(0); ++i) {
    net->zero_grad();
    const auto stats = loss_statistics(net->forward(b.input.narrow(0, i, 1)), b.target.narrow(0, i, 1), lo);
    loss_from_statistics(torch::cat({batch_weight, stats.narrow(0, 1, stats.numel() - 1)}), lo, classes).backward();
    for (const auto& p : net->named_parameters()) {
      const torch::Tensor g = p.value().grad().abs();
      auto [it, fresh] = sum_abs.try_emplace(p.key(), g.clone());
      if (!fresh) it->second += g;
    }
  }
  for (const auto& [name, m] : sum_abs) r.magnitude[name] = m.max().item<double>();
  net->zero_grad();
  return r;
}

// Conv biases right before a group normalisation (and the up-convolutions' biases, which reach
// one through a linear convolution) only shift what the norm centres: with one
// channel per group their true gradient is 0 and autograd returns rounding noise (with more,
// a small difference between channels), so they are compared against the model's largest
// gradient instead of their own. Without a norm every parameter is compared against itself.
bool inert(const std::string& name, const UNetOptions& o) {
  static const std::regex conv_bias(R"(^((enc|dec)\d+\.conv\d+|up\d+)\.bias$)");
  return o.norm != Norm::kNone && std::regex_match(name, conv_bias);
}

struct Comparison {
  double worst = 0;  // max over this stage's parameters of max|a − b| / Reference::magnitude
  std::string worst_name;
  int64_t compared = 0;  // parameters (elements) compared on this rank
};

Comparison compare(PipelineTrainer& t, const Reference& r, const UNetOptions& o) {
  double largest = 0;
  for (const auto& [name, g] : r.grads) largest = std::max(largest, g.abs().max().item<double>());
  Comparison c;
  for (const auto& p : t.stage()->named_parameters()) {
    const auto it = r.grads.find(p.key());
    if (it == r.grads.end()) {
      ADD_FAILURE() << "stage parameter " << p.key() << " is not in the model";
      continue;
    }
    const torch::Tensor& ref = it->second;
    EXPECT_TRUE(p.value().grad().defined()) << p.key();
    if (!p.value().grad().defined()) continue;
    const double diff = (p.value().grad() - ref).abs().max().item<double>();
    const double scale = inert(p.key(), o) ? largest : r.magnitude.at(p.key());
    const double rel = diff / std::max(scale, 1e-30);
    if (rel > c.worst) {
      c.worst = rel;
      c.worst_name = p.key();
    }
    c.compared += p.value().numel();
  }
  return c;
}

struct Case {
  int stages = 2;
  int micro_batches = 1;
  Schedule schedule = Schedule::kGPipe;
  Norm norm = Norm::kNone;
  int64_t local_batch = 4;
  bool memory_balance = false;
  std::vector<double> class_weights;
  ActivationCheckpoint checkpoint = ActivationCheckpoint::kNever;

  Case(int k, int m, Schedule s) : stages(k), micro_batches(m), schedule(s) {}
  Case& with_checkpoint(ActivationCheckpoint a) { checkpoint = a; return *this; }
  Case& with_norm(Norm n) { norm = n; return *this; }
  Case& with_local_batch(int64_t b) { local_batch = b; return *this; }
  Case& with_memory_balance() { memory_balance = true; return *this; }
  Case& with_class_weights(std::vector<double> w) { class_weights = std::move(w); return *this; }
};

std::string describe(const Case& c, int replicas) {
  return "K=" + std::to_string(c.stages) + " M=" + std::to_string(c.micro_batches) + " " + to_string(c.schedule) +
         " dp=" + std::to_string(replicas) + " norm=" + to_string(c.norm) + " batch=" + std::to_string(c.local_batch) +
         " checkpoint=" + to_string(c.checkpoint);
}

std::vector<int> balance_for(const Case& c, const LayerSequence& seq) {
  if (!c.memory_balance) return balance_naive(seq.size(), c.stages).sizes;
  return balance_by_memory(seq, c.stages,
                           StageMemoryOptions().with_micro_batches(c.micro_batches).with_schedule(c.schedule))
      .sizes;
}

// Runs `c` on the world as data × pipeline = (size / K) × K and checks it against one
// process with the global batch. A world that cannot hold K stages fails the test (false).
bool expect_same_as_one_process(const Case& c) {
  Communicator& w = world();
  if (w.size() % c.stages != 0) {
    ADD_FAILURE() << w.size() << " ranks cannot hold " << c.stages << " stages";
    return false;
  }
  ProcessGrid grid(w, GridShape().with_pipeline(c.stages));
  const int replicas = grid.shape().data;
  const UNetOptions o = tiny(c.norm);
  const int64_t side = small_side(o);
  const LayerSequence seq = unet_layer_sequence(o, side);
  const std::vector<int> balance = balance_for(c, seq);

  // Precondition of the test: at least one skip crosses a stage boundary.
  std::vector<int> stage_of;
  for (int s = 0; s < c.stages; ++s)
    for (int i = 0; i < balance[static_cast<size_t>(s)]; ++i) stage_of.push_back(s);
  int crossing = 0;
  for (const auto& e : seq.skips)
    crossing += stage_of[static_cast<size_t>(e.producer)] != stage_of[static_cast<size_t>(e.consumer)];
  EXPECT_GT(crossing, 0) << "balance keeps every skip inside one stage";

  LossOptions lo = LossOptions().with_kind(LossKind::kCrossEntropy).with_class_weights(c.class_weights);
  torch::manual_seed(11);
  UNet net(o);
  const Batch global = make_batch(o, side, c.local_batch * replicas, 5);
  const Reference ref = single_process(net, global, lo);

  PipelineTrainer trainer(*net, side, grid.pipeline(), grid.data(),
                          PipelineOptions(balance)
                              .with_micro_batches(c.micro_batches)
                              .with_schedule(c.schedule)
                              .with_loss(lo)
                              .with_checkpoint(c.checkpoint));
  const int64_t from = grid.data_rank() * c.local_batch;
  const bool first = trainer.stage_index() == 0, last = trainer.stage_index() == c.stages - 1;
  const double loss = trainer.train_step(first ? global.input.narrow(0, from, c.local_batch) : torch::Tensor(),
                                         last ? global.target.narrow(0, from, c.local_batch) : torch::Tensor());

  const std::string what = describe(c, replicas);
  EXPECT_LE(std::abs(loss - ref.loss), 1e-5 * std::abs(ref.loss)) << what << ": loss " << loss << " vs " << ref.loss;
  const Comparison cmp = compare(trainer, ref, o);
  EXPECT_LE(cmp.worst, 1e-5) << what << ": stage " << trainer.stage_index() << " parameter " << cmp.worst_name;
  if (cmp.worst > 1e-5)  // other ranks' failures are not printed (mpi_test_main.cpp)
    std::printf("[ rank %d  ] %s: stage %d parameter %s differs by %.3g relative\n", w.rank(), what.c_str(),
                trainer.stage_index(), cmp.worst_name.c_str(), cmp.worst);
  // Every parameter of the model lives on exactly one stage of each replica.
  torch::Tensor count = torch::tensor({cmp.compared}, torch::kInt64);
  grid.pipeline().allreduce(count, ReduceOp::kSum);
  EXPECT_EQ(count.item<int64_t>(), unet_parameter_count(o)) << what;
  // 1F1B bounds the micro-batches in flight at min(M, K − s); GPipe holds all M.
  const int expected_flight = c.schedule == Schedule::kGPipe
                                  ? c.micro_batches
                                  : std::min(c.micro_batches, c.stages - trainer.stage_index());
  EXPECT_EQ(trainer.last_step().max_in_flight, expected_flight) << what;
  // Checkpointing keeps whole activations for one micro-batch at a time (always), or for the
  // last one beside one being recomputed (except_last); without it, for every one in flight.
  const int expected_graphs = c.checkpoint == ActivationCheckpoint::kNever    ? expected_flight
                              : c.checkpoint == ActivationCheckpoint::kAlways ? 1
                                                                               : std::min(2, expected_flight);
  if (c.checkpoint == ActivationCheckpoint::kExceptLast) {
    EXPECT_LE(trainer.last_step().max_graphs_held, expected_graphs) << what;
    EXPECT_GE(trainer.last_step().max_graphs_held, 1) << what;
  } else {
    EXPECT_EQ(trainer.last_step().max_graphs_held, expected_graphs) << what;
  }

  torch::Tensor worst = torch::tensor({cmp.worst}, torch::kFloat64);
  w.allreduce(worst, ReduceOp::kMax);
  if (w.rank() == 0)
    std::printf("[ rank 0  ] %s: loss %.6f (one process %.6f), max relative gradient difference %.2g\n", what.c_str(),
                loss, ref.loss, worst.item<double>());
  return true;
}

TEST(Pipeline, BlockOrdersAreGPipeAnd1F1B) {
  // Hand-worked: K = 2, M = 3.
  using B = PipelineBlock;
  const auto gpipe = pipeline_block_order(2, 3, Schedule::kGPipe);
  const std::vector<B> g0{{0, true, 0}, {0, true, 1}, {0, true, 2}, {0, false, 2}, {0, false, 1}, {0, false, 0}};
  EXPECT_EQ(gpipe[0], g0);
  const auto ofob = pipeline_block_order(2, 3, Schedule::kOneFOneB);
  const std::vector<B> o0{{0, true, 0}, {0, true, 1}, {0, false, 0}, {0, true, 2}, {0, false, 1}, {0, false, 2}};
  const std::vector<B> o1{{1, true, 0}, {1, false, 0}, {1, true, 1}, {1, false, 1}, {1, true, 2}, {1, false, 2}};
  EXPECT_EQ(ofob[0], o0);
  EXPECT_EQ(ofob[1], o1);
  // In general: every block once, F(m) before B(m), activations in flight as the schedules promise.
  for (int K = 1; K <= 5; ++K)
    for (int M = 1; M <= 6; ++M)
      for (Schedule kind : {Schedule::kGPipe, Schedule::kOneFOneB}) {
        const auto order = pipeline_block_order(K, M, kind);
        ASSERT_EQ(order.size(), size_t(K));
        for (int s = 0; s < K; ++s) {
          std::vector<int> f(M, -1), b(M, -1);
          int flight = 0, most = 0;
          for (int i = 0; i < int(order[s].size()); ++i) {
            const B& x = order[s][i];
            ASSERT_EQ(x.stage, s);
            (x.forward ? f : b)[x.micro_batch] = i;
            flight += x.forward ? 1 : -1;
            most = std::max(most, flight);
          }
          for (int m = 0; m < M; ++m) EXPECT_TRUE(f[m] >= 0 && b[m] > f[m]) << "K=" << K << " M=" << M << " s=" << s;
          EXPECT_EQ(most, kind == Schedule::kGPipe ? M : std::min(M, K - s)) << "K=" << K << " M=" << M << " s=" << s;
        }
      }
}

// Stages chained in one process (skips handed directly to their consumer) compute the full
// forward; needs no MPI, runs on every rank alike.
TEST(Pipeline, StagesChainedInOneProcessEqualTheFullForward) {
  for (Norm norm : {Norm::kNone, Norm::kGroup}) {
    const UNetOptions o = tiny(norm);
    const int64_t side = small_side(o);
    const LayerSequence seq = unet_layer_sequence(o, side);
    torch::manual_seed(2);
    UNet net(o);
    const Batch b = make_batch(o, side, 2, 3);
    const auto expected = net->forward(b.input);
    for (int K : {1, 2, 3, 4, 5}) {
      const auto part = balance_naive(seq.size(), K);
      std::map<int, torch::Tensor> skips;  // in flight between stages
      StageTensors in{b.input, {}};
      for (int s = 0; s < K; ++s) {
        UNetStage stage(*net, seq, part.first(s), part.first(s) + part.sizes[s] - 1);
        for (int e : stage->skips_in()) in.skips[e] = skips.at(e);
        StageTensors out = stage->forward(in);
        ASSERT_EQ(out.skips.size(), stage->skips_out().size());
        for (auto& [e, t] : out.skips) {
          EXPECT_EQ(t.sizes().vec(), stage->skip_shape(e, 2));
          skips[e] = t;
        }
        in = StageTensors{out.main, {}};
      }
      EXPECT_TRUE(torch::allclose(in.main, expected, 1e-5, 1e-6)) << "K=" << K << " norm=" << to_string(norm);
    }
  }
}

TEST(Pipeline, GPipeTwoStagesEqualsOneProcess) {
  for (int m : {1, 2, 4}) expect_same_as_one_process(Case(2, m, Schedule::kGPipe));
}

TEST(Pipeline, OneFOneBTwoStagesEqualsOneProcess) {
  for (int m : {1, 2, 4}) expect_same_as_one_process(Case(2, m, Schedule::kOneFOneB));
}

TEST(Pipeline, GroupNormClassWeightsUnevenMicroBatches) {
  for (Schedule s : {Schedule::kGPipe, Schedule::kOneFOneB})
    expect_same_as_one_process(
        Case(2, 2, s).with_norm(Norm::kGroup).with_local_batch(3).with_class_weights({1.0, 2.0, 0.5}));
}

// Needs a multiple of 4 ranks: only in the -np 4 run (tests/CMakeLists.txt).
TEST(Pipeline, GPipeFourStagesEqualsOneProcess) {
  ASSERT_EQ(world().size() % 4, 0) << "needs a multiple of 4 ranks";
  for (int m : {1, 2, 4}) expect_same_as_one_process(Case(4, m, Schedule::kGPipe));
}

TEST(Pipeline, OneFOneBFourStagesEqualsOneProcess) {
  ASSERT_EQ(world().size() % 4, 0) << "needs a multiple of 4 ranks";
  for (int m : {1, 2, 4}) expect_same_as_one_process(Case(4, m, Schedule::kOneFOneB));
  // The memory-aware balance and group norm cut elsewhere.
  expect_same_as_one_process(Case(4, 4, Schedule::kOneFOneB).with_norm(Norm::kGroup).with_memory_balance());
}

// Recomputed forwards give the same values, so checkpointing changes no gradient.
TEST(Pipeline, ActivationCheckpointingEqualsOneProcess) {
  for (auto a : {ActivationCheckpoint::kAlways, ActivationCheckpoint::kExceptLast})
    for (Schedule s : {Schedule::kGPipe, Schedule::kOneFOneB}) {
      expect_same_as_one_process(Case(2, 4, s).with_checkpoint(a).with_norm(Norm::kGroup));
      if (world().size() % 4 == 0) expect_same_as_one_process(Case(4, 4, s).with_checkpoint(a));
    }
}

// Exactly 4 ranks (2 replicas × 2 stages): only in the -np 4 run (tests/CMakeLists.txt).
TEST(Pipeline, DataTimesPipelineTwoByTwoEqualsOneProcessWithTheGlobalBatch) {
  ASSERT_EQ(world().size(), 4) << "needs 4 ranks";
  for (Schedule s : {Schedule::kGPipe, Schedule::kOneFOneB}) expect_same_as_one_process(Case(2, 2, s));
}

// Elements per sample a stage receives, from the layer sequence alone: forward, its main input
// and the skips it consumes from earlier stages; backward, the gradients of its main output
// and of the skips it sends to later stages.
struct Received {
  int64_t forward = 0, backward = 0;
  bool skip_over_a_stage = false;  // some skip jumps over a whole stage
};

Received received_per_sample(const LayerSequence& seq, const Partition& part, int me) {
  const int K = part.stages();
  std::vector<int> stage_of;
  for (int s = 0; s < K; ++s)
    for (int i = 0; i < part.sizes[s]; ++i) stage_of.push_back(s);
  Received r;
  r.forward = me > 0 ? seq.layers[part.first(me) - 1].out_elements : 0;
  r.backward = me < K - 1 ? seq.layers[part.first(me + 1) - 1].out_elements : 0;
  for (const auto& e : seq.skips) {
    const int p = stage_of[e.producer], c = stage_of[e.consumer];
    if (c == me && p < me) r.forward += e.cropped_elements;
    if (p == me && c > me) r.backward += e.cropped_elements;
    r.skip_over_a_stage |= c > p + 1;
  }
  return r;
}

// Each stage receives its main input and only the skips it consumes (forward), and the
// gradients of what it sent (backward): no stage relays another's skip. Expected bytes from
// the layer sequence alone.
TEST(Pipeline, SkipsGoStraightToTheirConsumer) {
  Communicator& w = world();
  const int K = w.size() >= 4 ? 4 : 2;
  ASSERT_EQ(w.size() % K, 0) << "needs a multiple of " << K << " ranks";
  ProcessGrid grid(w, GridShape().with_pipeline(K));
  const UNetOptions o = tiny(Norm::kNone);
  const int64_t side = small_side(o);
  const LayerSequence seq = unet_layer_sequence(o, side);
  const auto part = balance_naive(seq.size(), K);
  const int me = grid.pipeline_stage();
  const int64_t n = 4;
  const Received r = received_per_sample(seq, part, me);
  if (K == 4) {
    EXPECT_TRUE(r.skip_over_a_stage) << "the naive 4-stage cut should send a skip over a stage";
  }
  torch::manual_seed(11);
  UNet net(o);
  const Batch b = make_batch(o, side, n, 5);
  PipelineTrainer t(*net, side, grid.pipeline(), grid.data(),
                    PipelineOptions(part.sizes).with_micro_batches(2).with_schedule(Schedule::kOneFOneB));
  t.train_step(b.input, b.target);
  EXPECT_EQ(t.last_step().bytes_received, 4 * n * (r.forward + r.backward)) << "stage " << me;
  // What one stage sends, another receives.
  torch::Tensor sent = torch::tensor({t.last_step().bytes_sent, t.last_step().bytes_received}, torch::kInt64);
  grid.pipeline().allreduce(sent, ReduceOp::kSum);
  EXPECT_EQ(sent[0].item<int64_t>(), sent[1].item<int64_t>());
}

// A stage lets go of what it received once the gradient has been sent back: under 1F1B with
// more micro-batches than stages, the received activations, skips and their gradients held
// at once stay within the stage's in-flight window min(M, K) (a received skip and its
// gradient live until the producer takes the gradient, at most K micro-batches later), not
// all M micro-batches'.
TEST(Pipeline, ReceivedTensorsAreReleasedOnceTheirGradientIsSent) {
  Communicator& w = world();
  const int K = w.size() >= 4 ? 4 : 2;
  ASSERT_EQ(w.size() % K, 0) << "needs a multiple of " << K << " ranks";
  ProcessGrid grid(w, GridShape().with_pipeline(K));
  const UNetOptions o = tiny(Norm::kNone);
  const int64_t side = small_side(o);
  const LayerSequence seq = unet_layer_sequence(o, side);
  const auto part = balance_naive(seq.size(), K);
  const int me = grid.pipeline_stage();
  const int M = 4 * K;
  // Per sample: forward inputs received (each held with its gradient), output gradients received.
  const Received r = received_per_sample(seq, part, me);
  torch::manual_seed(12);
  UNet net(o);
  const Batch b = make_batch(o, side, M, 6);
  PipelineTrainer t(*net, side, grid.pipeline(), grid.data(),
                    PipelineOptions(part.sizes).with_micro_batches(M).with_schedule(Schedule::kOneFOneB));
  t.train_step(b.input, b.target);
  // Every stage's figures on every rank, so rank 0 reports any stage's failure.
  torch::Tensor held = torch::zeros({K}, torch::kInt64), window = torch::zeros({K}, torch::kInt64);
  held[me] = t.last_step().max_received_bytes_held;
  window[me] = 4 * K * (2 * r.forward + r.backward);  // bytes: K micro-batches of one sample
  grid.pipeline().allreduce(held, ReduceOp::kSum);
  grid.pipeline().allreduce(window, ReduceOp::kSum);
  for (int s = 1; s < K; ++s) {
    EXPECT_GT(held[s].item<int64_t>(), 0) << "stage " << s;
    EXPECT_LE(held[s].item<int64_t>(), window[s].item<int64_t>())
        << "stage " << s << " held received tensors of more than K = " << K << " micro-batches";
  }
}

// The comparison is sharp enough to see a micro-batch missing: the reference computed
// without the last micro-batch's samples differs from the pipeline's gradients by far more
// than the tolerance.
TEST(Pipeline, ComparisonDetectsAMissingMicroBatch) {
  Communicator& w = world();
  ASSERT_EQ(w.size() % 2, 0) << "needs an even number of ranks";
  ProcessGrid grid(w, GridShape().with_pipeline(2));
  const UNetOptions o = tiny(Norm::kNone);
  const int64_t side = small_side(o);
  const LayerSequence seq = unet_layer_sequence(o, side);
  torch::manual_seed(11);
  UNet net(o);
  const Batch b = make_batch(o, side, 4, 5);
  const LossOptions lo = LossOptions().with_kind(LossKind::kCrossEntropy);
  Batch partial{b.input.narrow(0, 0, 3), b.target.narrow(0, 0, 3)};
  const Reference without_last = single_process(net, partial, lo);
  const Reference full = single_process(net, b, lo);
  PipelineTrainer t(*net, side, grid.pipeline(), grid.data(),
                    PipelineOptions(balance_naive(seq.size(), 2).sizes).with_micro_batches(4));
  // Every replica gets the same 4 samples: R·E over R·W is the one-process loss again.
  t.train_step(b.input, b.target);
  EXPECT_LE(compare(t, full, o).worst, 1e-5);
  EXPECT_GT(compare(t, without_last, o).worst, 1e-2);
}

// K = 1 on one-rank groups (no MPI traffic): micro-batching alone equals one process.
TEST(Pipeline, OneStageOnSelfGroupsEqualsOneProcess) {
  const UNetOptions o = tiny(Norm::kGroup);
  const int64_t side = small_side(o);
  torch::manual_seed(11);
  UNet net(o);
  const Batch b = make_batch(o, side, 3, 7);
  const LossOptions lo = LossOptions().with_kind(LossKind::kFocal).with_focal_gamma(2.0);
  const Reference ref = single_process(net, b, lo);
  auto pipeline = make_self_communicator(), data = make_self_communicator();
  PipelineTrainer t(*net, side, *pipeline, *data,
                    PipelineOptions({unet_layer_count(o)}).with_micro_batches(3).with_loss(lo));
  const double loss = t.train_step(b.input, b.target);
  EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss);
  EXPECT_LE(compare(t, ref, o).worst, 1e-5);
  EXPECT_EQ(t.last_step().bytes_sent, 0);
}

TEST(Pipeline, OptionsNameTheBadField) {
  const UNetOptions o = tiny(Norm::kNone);
  const LayerSequence seq = unet_layer_sequence(o, small_side(o));
  auto message = [](const PipelineOptions& p, const LayerSequence& on) {
    try {
      p.validate(on);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(PipelineOptions(balance_naive(seq.size(), 3).sizes), seq), "");
  EXPECT_NE(message(PipelineOptions({seq.size() - 1, 1, 0}), seq).find("pipeline.balance"), std::string::npos);
  EXPECT_NE(message(PipelineOptions({seq.size() - 1}), seq).find("pipeline.balance"), std::string::npos);
  EXPECT_NE(message(PipelineOptions({seq.size()}).with_micro_batches(0), seq).find("pipeline.micro_batches"),
            std::string::npos);
  EXPECT_NE(message(PipelineOptions({seq.size()}).with_loss(LossOptions().with_kind(LossKind::kDice)), seq)
                .find("pipeline.loss.kind"),
            std::string::npos);
  const LayerSequence bn = unet_layer_sequence(tiny(Norm::kBatch), small_side(o));
  EXPECT_NE(message(PipelineOptions({bn.size()}), bn).find("model.norm"), std::string::npos);
}

}  // namespace
}  // namespace tessera::parallel
