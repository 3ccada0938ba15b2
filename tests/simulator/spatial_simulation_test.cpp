// The simulator's spatial model (SimulationOptions::with_spatial, simulator.hpp): one tile split
// over sp ranks costs each rank the largest block's share of the tile's compute plus the halo
// exchanges, α per message and bytes / β of the link. The halo bytes here are counted by hand
// from the network's own shape, not taken from spatial_plan.
//
// unet-tiny with `same` padding (4 levels, 16 filters, two 3×3 convolutions per level, 4 input
// bands) on a 64² tile has 14 K > 1 convolutions; their input channels C by the side s they
// run at:
//   s 64: enc0 4, 16;   dec0 32, 16    Σ C  68
//   s 32: enc1 16, 32;  dec1 64, 32    Σ C 144
//   s 16: enc2 32, 64;  dec2 128, 64   Σ C 288
//   s  8: enc3 64, 128                 Σ C 192
// so Σ C·s = 68·64 + 144·32 + 288·16 + 192·8 = 15104 and Σ C = 692. Every convolution
// exchanges a halo of width 1 in the forward and again in the backward, except the first one's
// backward (the network input needs no gradient): 27 exchanges per training step.
#include <gtest/gtest.h>

#include <initializer_list>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "tessera/parallel/plan/cluster.hpp"
#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::parallel {
namespace {

constexpr int64_t kSumChannelsTimesSide = 15104;
constexpr int64_t kSumChannels = 692;
constexpr int64_t kFirstConvChannelsTimesSide = 4 * 64;  // enc0.conv0: forward exchange only
constexpr int kExchanges = 2 * 14 - 1;

UNetOptions same_tiny() { return unet_preset("unet-tiny").with_padding(Padding::kSame); }

// One node of `devices` with links chosen so that every term is visible: a slow network
// between nodes (so taking the wrong link shows), and input reads that take no time.
ClusterModel node_of(int devices, int nodes = 1) {
  ClusterModel c;
  c.devices_per_node = devices;
  c.nodes = nodes;
  c.intra_node_latency_seconds = 1e-5;
  c.intra_node_bytes_per_second = 1e9;
  c.inter_node_latency_seconds = 1e-3;
  c.inter_node_bytes_per_second = 1e7;
  c.io_bytes_per_second_per_node = 1e30;
  return c;
}

double sum_forward(const LayerSequence& seq, const ClusterModel& c) {
  const std::vector<double> f = layer_forward_seconds(seq, c.device, Precision::kFp32);
  return std::accumulate(f.begin(), f.end(), 0.0);
}

double sum_backward(const LayerSequence& seq, const ClusterModel& c) {
  const std::vector<double> b = layer_pass_seconds(seq, c.device, Precision::kFp32, 1).backward;
  return std::accumulate(b.begin(), b.end(), 0.0);
}

const ScheduleEvent& event(const SimulationResult& r, ScheduleEvent::Kind k) {
  for (const ScheduleEvent& e : r.events)
    if (e.kind == k && e.device == 0 && e.micro_batch == 0) return e;
  throw std::runtime_error("no event of kind " + to_string(k));
}

double duration(const SimulationResult& r, ScheduleEvent::Kind k) { return event(r, k).end - event(r, k).start; }

TEST(SimulateSpatial, TwoRanksTakeHalfTheComputePlusHandCountedHaloSlabs) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 64);
  ASSERT_EQ(seq.layers.front().in_channels, 4);
  const ClusterModel c = node_of(2);
  const SimulationResult r = simulate(SimulationOptions(seq).with_spatial(2), c);
  // Mesh 2 × 1, blocks of 32 × 64: each rank sends one row of s floats per channel to its one
  // neighbour, per exchange.
  const double bytes = 4.0 * (2 * kSumChannelsTimesSide - kFirstConvChannelsTimesSide);
  ASSERT_EQ(bytes, 119808.0);
  const double halo = kExchanges * 1e-5 + bytes / 1e9;
  const double compute = 0.5 * sum_forward(seq, c), backward = 0.5 * sum_backward(seq, c);
  EXPECT_NEAR(duration(r, ScheduleEvent::Kind::kForward), compute + halo / 2, 1e-12);
  EXPECT_NEAR(duration(r, ScheduleEvent::Kind::kBackward), backward + halo / 2, 1e-12);
  EXPECT_NEAR(r.breakdown.halo, halo, 1e-12);
  EXPECT_NEAR(r.breakdown.compute, compute + backward, 1e-12);
}

TEST(SimulateSpatial, TwoByTwoMeshSendsSlabsAlongBothAxes) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 64);
  const ClusterModel c = node_of(4);
  const SimulationResult r = simulate(SimulationOptions(seq).with_spatial(4), c);
  // Mesh 2 × 2 (the most nearly square of 4), blocks of s/2 × s/2, every rank a corner with one
  // neighbour per axis: a row of s/2, then a column of s/2 + 2 (it carries the rows' halos).
  const double bytes = 4.0 * (2 * (kSumChannelsTimesSide + 2 * kSumChannels) - 4 * (64 + 2));
  ASSERT_EQ(bytes, 130848.0);
  const double halo = 2 * kExchanges * 1e-5 + bytes / 1e9;
  const double compute = 0.25 * sum_forward(seq, c), backward = 0.25 * sum_backward(seq, c);
  EXPECT_NEAR(duration(r, ScheduleEvent::Kind::kForward), compute + halo / 2, 1e-12);
  EXPECT_NEAR(duration(r, ScheduleEvent::Kind::kBackward), backward + halo / 2, 1e-12);
  EXPECT_NEAR(r.breakdown.halo, halo, 1e-12);
}

TEST(SimulateSpatial, InferenceSendsEveryHaloOnceInTheForward) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 64);
  const ClusterModel c = node_of(2);
  const SimulationResult r = simulate(SimulationOptions(seq).with_spatial(2).with_training(false), c);
  const double halo = 14 * 1e-5 + 4.0 * kSumChannelsTimesSide / 1e9;
  EXPECT_NEAR(duration(r, ScheduleEvent::Kind::kForward), 0.5 * sum_forward(seq, c) + halo, 1e-12);
  EXPECT_NEAR(r.breakdown.halo, halo, 1e-12);
}

TEST(SimulateSpatial, RanksOnTwoNodesExchangeOverTheNetwork) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 64);
  const ClusterModel c = node_of(1, 2);
  const SimulationResult r = simulate(SimulationOptions(seq).with_spatial(2).with_training(false), c);
  const double halo = 14 * 1e-3 + 4.0 * kSumChannelsTimesSide / 1e7;
  EXPECT_NEAR(r.breakdown.halo, halo, 1e-12);
}

TEST(SimulateSpatial, UnevenBlocksCostTheLargestBlocksShare) {
  // 40 = 5 units of 8 over 2 ranks: blocks of 24 and 16 rows; the step waits for the 24.
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 40);
  ClusterModel c = node_of(2);
  c.intra_node_latency_seconds = 0;
  c.intra_node_bytes_per_second = 1e30;
  const SimulationResult r = simulate(SimulationOptions(seq).with_spatial(2).with_training(false), c);
  EXPECT_NEAR(duration(r, ScheduleEvent::Kind::kForward), 24.0 / 40.0 * sum_forward(seq, c), 1e-12);
}

// The limit: on free links a split divides the tile's compute by sp and adds nothing else, and
// sp = 1 is the unsplit step.
TEST(SimulateSpatial, OnFreeLinksComputeFallsAsOneOverSpFromTheUnsplitStep) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 64);
  ClusterModel c = node_of(8);
  c.intra_node_latency_seconds = 0;
  c.intra_node_bytes_per_second = 1e30;
  const SimulationResult one = simulate(SimulationOptions(seq).with_training(false), c);
  EXPECT_DOUBLE_EQ(simulate(SimulationOptions(seq).with_spatial(1).with_training(false), c).step_seconds,
                   one.step_seconds);
  EXPECT_NEAR(one.breakdown.compute, sum_forward(seq, c), 1e-12);
  double previous = one.step_seconds;
  for (int sp : {2, 4, 8}) {
    const SimulationResult r = simulate(SimulationOptions(seq).with_spatial(sp).with_training(false), c);
    EXPECT_NEAR(r.breakdown.compute, one.breakdown.compute / sp, 1e-12) << "sp " << sp;
    EXPECT_NEAR(r.breakdown.halo, 0, 1e-12) << "sp " << sp;
    EXPECT_LT(r.step_seconds, previous) << "sp " << sp;
    previous = r.step_seconds;
  }
}

// Each rank holds the whole network's state and its block's activations: the planner's figure.
TEST(SimulateSpatial, DeviceMemoryIsTheSpatialPlanOfTheMeshPlusTheBaseline) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 64);
  const ClusterModel c = node_of(4);
  const SimulationResult r = simulate(SimulationOptions(seq).with_spatial(4), c);
  ASSERT_EQ(r.device_peak_bytes.size(), 1u);
  EXPECT_EQ(r.device_peak_bytes[0], spatial_plan(seq, {2, 2}).bytes + c.device.baseline_bytes);
}

// dp × sp ranks that all sit on one node: nothing crosses the network between nodes, so its
// bandwidth and latency cannot change the step (halo exchanges nor gradient allreduce).
TEST(SimulateSpatial, OneNodeStepDoesNotDependOnTheNetworkBetweenNodes) {
  const ClusterModel c = node_of(6);
  for (const auto& [sp, dp] : std::initializer_list<std::pair<int, int>>{{2, 3}, {3, 2}, {2, 2}, {6, 1}}) {
    ClusterModel fast = c;
    fast.inter_node_bytes_per_second = 1e15;
    fast.inter_node_latency_seconds = 0;
    const auto o = SimulationOptions(unet_layer_sequence(same_tiny(), sp == 3 || sp == 6 ? 48 : 64))
                       .with_spatial(sp)
                       .with_data_parallel(dp)
                       .with_tiles(dp);
    const SimulationResult slow_net = simulate(o, c), fast_net = simulate(o, fast);
    EXPECT_GT(slow_net.breakdown.allreduce, 0) << "sp " << sp << " dp " << dp;
    EXPECT_DOUBLE_EQ(slow_net.breakdown.allreduce, fast_net.breakdown.allreduce) << "sp " << sp << " dp " << dp;
    EXPECT_DOUBLE_EQ(slow_net.step_seconds, fast_net.step_seconds) << "sp " << sp << " dp " << dp;
  }
}

}  // namespace
}  // namespace tessera::parallel
