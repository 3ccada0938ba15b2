// The domain × data × pipeline × spatial grid: sizes validated, coordinates and groups consistent.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/process_grid.hpp"
#include "tessera/parallel/comm/runtime.hpp"

namespace tessera::parallel {
namespace {

TEST(ProcessGrid, ShapeValidatedAgainstWorldSize) {
  EXPECT_EQ(GridShape{}.resolved(8).data, 8);
  EXPECT_EQ(GridShape{}.with_spatial(2).resolved(8).data, 4);
  EXPECT_THROW(GridShape{}.with_pipeline(3).resolved(8), Error);
  EXPECT_THROW(GridShape{}.with_data(3).resolved(4), Error);
  EXPECT_THROW(GridShape{}.with_spatial(0).resolved(4), Error);
  EXPECT_NO_THROW(GridShape{}.with_data(2).with_pipeline(2).with_spatial(2).resolved(8));
}

TEST(ProcessGrid, DataAxisTakesAllRanksByDefault) {
  Communicator& w = world();
  ProcessGrid g(w, GridShape{});
  EXPECT_EQ(g.shape().data, w.size());
  EXPECT_EQ(g.data().size(), w.size());
  EXPECT_EQ(g.data_rank(), w.rank());
  EXPECT_EQ(g.pipeline().size(), 1);
  EXPECT_TRUE(g.is_replica_leader());
  EXPECT_EQ(g.previous_stage(), -1);
  EXPECT_EQ(g.next_stage(), -1);
}

TEST(ProcessGrid, GroupsHoldTheRanksOfTheirAxis) {
  Communicator& w = world();
  ASSERT_EQ(w.size() % 2, 0) << "needs an even number of ranks (mpirun -np 2 or 4)";
  // Spatial pairs when possible: (data P/2 × spatial 2); with 4 ranks also a pipeline of 2.
  GridShape shape = w.size() >= 4 ? GridShape{}.with_pipeline(2).with_spatial(2) : GridShape{}.with_spatial(2);
  ProcessGrid g(w, shape);
  EXPECT_EQ(g.world_rank_of(g.data_rank(), g.pipeline_stage(), g.spatial_rank()), w.rank());
  EXPECT_EQ(g.spatial().size(), 2);
  EXPECT_EQ(g.spatial().rank(), g.spatial_rank());
  EXPECT_EQ(g.data().rank(), g.data_rank());
  EXPECT_EQ(g.pipeline().rank(), g.pipeline_stage());
  // Sum of world ranks over the spatial group equals the two neighbours' ranks.
  torch::Tensor t = torch::tensor({int64_t(w.rank())});
  g.spatial().allreduce(t, ReduceOp::kSum);
  const int left = g.world_rank_of(g.data_rank(), g.pipeline_stage(), 0);
  EXPECT_EQ(t.item<int64_t>(), 2 * left + 1);
  EXPECT_EQ(g.spatial_rank() == 0 ? g.spatial_next() : g.spatial_previous(), g.spatial_rank() == 0 ? left + 1 : left);
  // The data group gathers one rank per replica at the same (p, s).
  torch::Tensor all = g.data().allgather(torch::tensor({int64_t(w.rank())}));
  for (int d = 0; d < g.shape().data; ++d)
    EXPECT_EQ(all[d].item<int64_t>(), g.world_rank_of(d, g.pipeline_stage(), g.spatial_rank()));
  EXPECT_EQ(g.is_replica_leader(), g.pipeline_stage() == 0 && g.spatial_rank() == 0);
}

// The domain axis is outermost: group g holds the consecutive ranks [g·P/G, (g+1)·P/G), and
// its group gathers one rank per domain group at the same (d, p, s).
TEST(ProcessGrid, DomainAxisIsOutermost) {
  EXPECT_EQ(GridShape{}.with_domain(2).with_spatial(2).resolved(8).data, 2);
  EXPECT_THROW(GridShape{}.with_domain(3).resolved(4), Error);
  EXPECT_THROW(GridShape{}.with_domain(0).resolved(4), Error);
  Communicator& w = world();
  ASSERT_EQ(w.size() % 2, 0) << "needs an even number of ranks (mpirun -np 2 or 4)";
  ProcessGrid g(w, GridShape{}.with_domain(2));
  const int per_group = w.size() / 2;
  EXPECT_EQ(g.shape().data, per_group);
  EXPECT_EQ(g.domain_group(), w.rank() / per_group);
  EXPECT_EQ(g.domain().rank(), g.domain_group());
  EXPECT_EQ(g.data().size(), per_group);
  EXPECT_EQ(g.world_rank_of(g.data_rank(), 0, 0), w.rank());
  torch::Tensor all = g.domain().allgather(torch::tensor({int64_t(w.rank())}));
  for (int k = 0; k < 2; ++k) EXPECT_EQ(all[k].item<int64_t>(), k * per_group + g.data_rank());
}

}  // namespace
}  // namespace tessera::parallel
