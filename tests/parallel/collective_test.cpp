// Collectives of the MPI backend against values computed by hand from the rank numbers.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/parallel/comm/runtime.hpp"

namespace tessera::parallel {
namespace {

TEST(Collective, BackendIsMpiAcrossTheWholeJob) {
  Communicator& w = world();
  EXPECT_EQ(w.backend(), "mpi");
  EXPECT_GE(w.size(), 1);
  EXPECT_EQ(launch_info().size, w.size());
  EXPECT_NE(compiled_backends().find("mpi"), std::string::npos);
}

TEST(Collective, AllreduceSumAndAverageMatchClosedForm) {
  Communicator& w = world();
  const int p = w.size(), r = w.rank();
  // rank r holds [r, 2r, ..., ] + i: sum over ranks = p(p-1)/2·(i+1)... computed directly.
  torch::Tensor t = torch::arange(1000, torch::kFloat) + float(r);
  w.allreduce(t, ReduceOp::kSum);
  torch::Tensor expect = torch::arange(1000, torch::kFloat) * p + float(p * (p - 1) / 2);
  EXPECT_TRUE(torch::equal(t, expect));

  torch::Tensor a = torch::full({3, 5}, double(r), torch::kDouble);
  w.allreduce(a, ReduceOp::kAverage);
  EXPECT_DOUBLE_EQ(a.max().item<double>(), (p - 1) / 2.0);
  EXPECT_DOUBLE_EQ(a.min().item<double>(), (p - 1) / 2.0);

  torch::Tensor m = torch::tensor({int64_t(r), int64_t(-r)});
  w.allreduce(m, ReduceOp::kMax);
  EXPECT_EQ(m[0].item<int64_t>(), p - 1);
  EXPECT_EQ(m[1].item<int64_t>(), 0);
}

TEST(Collective, BroadcastCopiesTheRootsTensor) {
  Communicator& w = world();
  for (int root = 0; root < w.size(); ++root) {
    torch::Tensor t = w.rank() == root ? torch::arange(17, torch::kLong) * (root + 1) : torch::zeros({17}, torch::kLong);
    w.broadcast(t, root);
    EXPECT_TRUE(torch::equal(t, torch::arange(17, torch::kLong) * (root + 1))) << "root " << root;
  }
}

TEST(Collective, AllgatherStacksEveryRanksTensorInRankOrder) {
  Communicator& w = world();
  torch::Tensor mine = torch::full({2, 3}, float(10 * w.rank()));
  torch::Tensor all = w.allgather(mine);
  ASSERT_EQ(all.sizes(), (std::vector<int64_t>{w.size(), 2, 3}));
  for (int r = 0; r < w.size(); ++r) EXPECT_TRUE(torch::equal(all[r], torch::full({2, 3}, float(10 * r))));
}

TEST(Collective, ReduceScatterGivesEachRankItsSliceOfTheSum) {
  Communicator& w = world();
  const int p = w.size();
  torch::Tensor t = torch::arange(4 * p, torch::kFloat) * float(w.rank() + 1);
  torch::Tensor mine = w.reduce_scatter(t, ReduceOp::kSum);
  const float ranks_sum = float(p * (p + 1) / 2);
  EXPECT_TRUE(torch::equal(mine, torch::arange(4 * w.rank(), 4 * w.rank() + 4, torch::kFloat) * ranks_sum));
}

TEST(Collective, SendRecvPassesATensorAroundTheRing) {
  Communicator& w = world();
  ASSERT_GE(w.size(), 2) << "run under mpirun -np 2 or 4";
  const int next = (w.rank() + 1) % w.size(), prev = (w.rank() + w.size() - 1) % w.size();
  torch::Tensor out = torch::full({64}, float(w.rank()));
  torch::Tensor in = torch::empty({64});
  // Even ranks send first, odd ranks receive first: no deadlock with blocking calls.
  if (w.rank() % 2 == 0) {
    w.send(out, next, 7);
    w.recv(in, prev, 7);
  } else {
    w.recv(in, prev, 7);
    w.send(out, next, 7);
  }
  EXPECT_TRUE(torch::equal(in, torch::full({64}, float(prev))));
  w.barrier();
}

// isend returns before the receiver has posted its receive: rank 0 posts a 4 MiB send (far
// above the eager limit) and enters a barrier that rank 1 joins before it receives. A
// blocking send would wait for the receive behind the barrier and time out.
TEST(Collective, IsendReturnsBeforeTheReceiverPostsItsReceive) {
  Communicator& w = world();
  ASSERT_GE(w.size(), 2) << "run under mpirun -np 2 or 4";
  const torch::Tensor payload = torch::arange(1 << 20, torch::kFloat);
  std::unique_ptr<PendingOperation> sent;
  if (w.rank() == 0) sent = w.isend(payload, 1, 7);
  w.barrier();
  if (w.rank() == 1) {
    torch::Tensor got = torch::empty_like(payload);
    w.recv(got, 0, 7);
    EXPECT_TRUE(torch::equal(got, payload));
  }
  if (sent) sent->wait();
  EXPECT_TRUE(!sent || sent->test());
}

// Two iallreduces in flight at once, finished in the opposite order, give the blocking sums;
// PackedAllreduce gives bit for bit what allreduce_sum_packed gives.
TEST(Collective, NonBlockingAllreducesEqualTheBlockingOnes) {
  Communicator& w = world();
  const int r = w.rank();
  torch::manual_seed(11 + r);
  const torch::Tensor a0 = torch::randn({1000}), b0 = torch::randn({3, 70});
  torch::Tensor a = a0.clone(), b = b0.clone(), a_ref = a0.clone(), b_ref = b0.clone();
  auto pa = w.iallreduce(a, ReduceOp::kSum);
  auto pb = w.iallreduce(b, ReduceOp::kSum);
  pb->wait();
  pa->wait();
  w.allreduce(a_ref, ReduceOp::kSum);
  w.allreduce(b_ref, ReduceOp::kSum);
  EXPECT_TRUE(torch::equal(a, a_ref));
  EXPECT_TRUE(torch::equal(b, b_ref));

  std::vector<torch::Tensor> packed{a0.clone(), b0.clone().contiguous(torch::MemoryFormat::Contiguous)};
  std::vector<torch::Tensor> blocking{a0.clone(), b0.clone()};
  PackedAllreduce op(w, packed);
  allreduce_sum_packed(w, blocking);
  op.finish();
  EXPECT_TRUE(op.test());
  EXPECT_TRUE(torch::equal(packed[0], blocking[0]));
  EXPECT_TRUE(torch::equal(packed[1], blocking[1]));
  if (w.size() > 1) {
    EXPECT_FALSE(torch::equal(packed[0], a0));  // the sums arrived
  }
}

// 16-bit floats are summed by MPI user operations: each addition in fp32, rounded back. With
// two ranks the sum is one rounding of the exact sum; with more, within one rounding per rank.
TEST(Collective, SixteenBitFloatSumsRoundEachAddition) {
  Communicator& w = world();
  const int p = w.size();
  for (const auto& [type, half_ulp] : {std::pair{torch::kBFloat16, 1.0 / 256}, std::pair{torch::kHalf, 1.0 / 2048}}) {
    std::vector<torch::Tensor> inputs;  // every rank's input, drawn here from its seed
    for (int r = 0; r < p; ++r) {
      torch::manual_seed(20 + r);
      inputs.push_back(torch::randn({257}).to(type));
    }
    torch::Tensor t = inputs[size_t(w.rank())].clone();
    w.allreduce(t, ReduceOp::kSum);
    torch::Tensor exact = torch::zeros({257}, torch::kDouble), magnitude = torch::zeros({257}, torch::kDouble);
    for (const auto& x : inputs) exact += x.to(torch::kDouble), magnitude += x.to(torch::kDouble).abs();
    if (p == 2) {
      EXPECT_TRUE(torch::equal(t, (inputs[0].to(torch::kFloat) + inputs[1].to(torch::kFloat)).to(type))) << type;
    } else {
      const double worst = ((t.to(torch::kDouble) - exact).abs() - (p - 1) * half_ulp * magnitude).max().item<double>();
      EXPECT_LE(worst, 0) << type;
    }
  }
  torch::Tensor b = torch::ones({4}, torch::kBFloat16);
  EXPECT_THROW(w.allreduce(b, ReduceOp::kMax), Error);
}

// Error feedback: a gradient bf16 cannot represent (1 + 2^-10 rounds to 1) sent 64 times. With
// the residual the applied sum stays within one rounding of the true one; without it, it
// falls behind by 2^-10 a step. Pairs of ranks (exact bf16 sums of equal values).
TEST(Collective, CompressedPackedAllreduceFeedsItsRoundingErrorForward) {
  Communicator& w = world();
  ASSERT_TRUE(w.size() >= 2 && w.size() % 2 == 0) << "run under mpirun -np 2 or 4 (pairs of ranks)";
  const std::unique_ptr<Communicator> pair = w.split(w.rank() / 2, w.rank());
  ASSERT_EQ(pair->size(), 2);
  const double g = 1.0 + 1.0 / 1024, steps = 64;
  for (const bool feedback : {true, false}) {
    torch::Tensor residual, applied = torch::zeros({8}, torch::kDouble);
    for (int k = 0; k < steps; ++k) {
      std::vector<torch::Tensor> grads{torch::full({8}, g)};
      PackedAllreduce(*pair, grads, Precision::kBf16, feedback ? &residual : nullptr).finish();
      applied += grads[0].to(torch::kDouble);
    }
    const double drift = (applied - 2 * steps * g).abs().max().item<double>();
    if (feedback)
      EXPECT_LE(drift, 2.0 / 256) << "with error feedback";
    else
      EXPECT_NEAR(drift, 2 * steps / 1024, 1e-9) << "without: every step's rounding is lost";
  }
}

TEST(Collective, RejectsTensorsItCannotMove) {
  Communicator& w = world();
  torch::Tensor strided = torch::zeros({4, 4}).t();
  EXPECT_THROW(w.allreduce(strided, ReduceOp::kSum), Error);
  torch::Tensor bytes = torch::zeros({4}, torch::kUInt8);
  EXPECT_THROW(w.allreduce(bytes, ReduceOp::kAverage), Error);
  torch::Tensor ints = torch::zeros({4}, torch::kInt);
  EXPECT_THROW(w.allreduce(ints, ReduceOp::kAverage), Error);
}

TEST(Collective, SelfGroupIsTheIdentity) {
  auto self = make_self_communicator();
  torch::Tensor t = torch::arange(5, torch::kFloat);
  self->allreduce(t, ReduceOp::kAverage);
  EXPECT_TRUE(torch::equal(t, torch::arange(5, torch::kFloat)));
  EXPECT_EQ(self->allgather(t).sizes(), (std::vector<int64_t>{1, 5}));
  EXPECT_THROW(self->send(t, 1), Error);
}

}  // namespace
}  // namespace tessera::parallel
