// The planner's model of spatial parallelism (planner.hpp spatial_plan): halo bytes from the
// exchange's own byte count (spatial.hpp halo_send_bytes), per-rank memory of the largest
// block, the α-β time, and the meshes it is asked about. The measured bytes are compared
// with these in `tessera bench spatial` (tests/planner/bench_spatial.sh).
#include <gtest/gtest.h>

#include <functional>
#include <numeric>

#include "tessera/core/error.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"
#include "tessera/parallel/modes/spatial.hpp"

namespace tessera::parallel {
namespace {

UNetOptions same_tiny() { return unet_preset("unet-tiny").with_padding(Padding::kSame).with_norm(Norm::kGroup); }

TEST(SpatialPlan, HaloBytesOfEveryConvolutionAreWhatTheExchangeSends) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 64);
  const SpatialMesh mesh{{2, 1}};
  const SpatialPlan p = spatial_plan(seq, mesh.parts, SpatialPlanOptions().with_micro_batch(3));
  ASSERT_EQ(p.layer_halo_bytes.size(), seq.layers.size());
  int64_t sum = 0;
  for (size_t i = 0; i < seq.layers.size(); ++i) {
    const Layer& l = seq.layers[i];
    if (l.kind != LayerKind::kConv) {
      EXPECT_EQ(p.layer_halo_bytes[i], 0) << l.name;
      continue;
    }
    // Each of the two ranks holds rows [0, 32) or [32, 64) of the input, scaled to the layer.
    const std::vector<int64_t> block{32 * l.in_side / 64, l.in_side};
    const int passes = i == 0 ? 1 : 2;  // no backward exchange into the network input
    int64_t expected = 0;
    for (int r = 0; r < 2; ++r)
      expected += passes * halo_send_bytes(mesh, mesh.coordinates(r), block, 3 * l.in_channels, 1, 4);
    EXPECT_EQ(p.layer_halo_bytes[i], expected) << l.name;
    // One neighbour each: a slab of one row.
    EXPECT_EQ(expected, 2 * passes * 3 * l.in_channels * l.in_side * 4) << l.name;
    sum += p.layer_halo_bytes[i];
  }
  EXPECT_EQ(p.halo_bytes, sum);
  EXPECT_EQ(std::accumulate(p.rank_halo_bytes.begin(), p.rank_halo_bytes.end(), int64_t{0}), sum);
}

TEST(SpatialPlan, MiddleBlocksSendToBothNeighbours) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 96);  // 12 units of 8: blocks of 32
  const SpatialPlan p = spatial_plan(seq, {3, 1});
  ASSERT_EQ(p.rank_halo_bytes.size(), 3u);
  EXPECT_GT(p.rank_halo_bytes[0], 0);
  EXPECT_EQ(p.rank_halo_bytes[0], p.rank_halo_bytes[2]);
  EXPECT_EQ(p.rank_halo_bytes[1], 2 * p.rank_halo_bytes[0]);
}

TEST(SpatialPlan, UnevenBlocksTakeTheLargestForMemory) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 40);  // 5 units of 8 over 2 ranks: 24 + 16
  const SpatialPlan p = spatial_plan(seq, {2, 1});
  EXPECT_EQ(p.largest_block, (std::vector<int64_t>{24, 40}));
  const SpatialPlan even = spatial_plan(unet_layer_sequence(same_tiny(), 48), {2, 1});  // 24 + 24
  EXPECT_EQ(even.largest_block, (std::vector<int64_t>{24, 48}));
  // The same 24 rows, 40 instead of 48 columns (up to the padded copies' rims).
  EXPECT_NEAR(double(p.activation_bytes) / double(even.activation_bytes), 40.0 / 48.0, 0.02);
}

TEST(SpatialPlan, ActivationsShrinkWithTheBlockAndStateIsReplicated) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 256);
  const SpatialPlan one = spatial_plan(seq, {1, 1}), two = spatial_plan(seq, {2, 1}), four = spatial_plan(seq, {4, 1}),
                    mesh = spatial_plan(seq, {2, 2});
  EXPECT_EQ(one.state_bytes, 16 * seq.parameter_count());
  for (const SpatialPlan* p : {&two, &four, &mesh}) {
    EXPECT_EQ(p->state_bytes, one.state_bytes);
    EXPECT_EQ(p->bytes, p->state_bytes + p->activation_bytes);
  }
  // A quarter of the image per rank, plus the halo slabs kept and one convolution's backward
  // copies (its padded input and their gradient: about two of its inputs).
  EXPECT_GT(double(four.activation_bytes), 0.25 * double(one.activation_bytes));
  EXPECT_LT(double(four.activation_bytes), 0.32 * double(one.activation_bytes));
  EXPECT_LT(two.activation_bytes, one.activation_bytes);
  EXPECT_EQ(one.halo_bytes, 0);
  // The 2 × 2 mesh sends less than four strips (shorter edges), though in two axes.
  EXPECT_LT(mesh.halo_bytes, four.halo_bytes);
}

TEST(SpatialPlan, DecomposedLayersKeepWhatOneProcessKeepsOnOneBlock) {
  // One rank "decomposed": every difference from the one-process layer model is a
  // decomposition term. Without norm and with 1×1 kernels there is none.
  const UNetOptions plain = unet_preset("unet-tiny").with_padding(Padding::kSame).with_kernel(1);
  const LayerSequence seq = unet_layer_sequence(plain, 64);
  const int64_t one_process = stage_bytes(seq, 0, seq.size() - 1, 1, StageMemoryOptions{});
  EXPECT_EQ(spatial_plan(seq, {1, 1}).bytes, one_process);
  // 3×3 kernels: a convolution keeps its unpadded input as one process does, plus the halo
  // slabs it received: none on one block, two per split axis otherwise.
  const LayerSequence k3 = unet_layer_sequence(UNetOptions(plain).with_kernel(3), 64);
  const int64_t k3_one_process = stage_bytes(k3, 0, k3.size() - 1, 1, StageMemoryOptions{});
  EXPECT_EQ(spatial_plan(k3, {1, 1}).bytes, k3_one_process);
  // Group norm keeps what one process's keeps (input, mean, 1/σ): no extra term.
  const LayerSequence gn = unet_layer_sequence(UNetOptions(plain).with_norm(Norm::kGroup), 64);
  const int64_t gn_one_process = stage_bytes(gn, 0, gn.size() - 1, 1, StageMemoryOptions{});
  EXPECT_EQ(spatial_plan(gn, {1, 1}).bytes, gn_one_process);
}

// What a split adds to the one-process layer model on the block (`sides` per axis), per K > 1
// convolution and input channel, from its block extent at that layer (`e`, per axis): `slab`
// floats kept for backward, `copies` floats alive in its backward beside the model's input and
// output gradients. The expected activation bytes of `micro` samples.
using PerChannel = std::function<int64_t(const std::vector<int64_t>& e)>;
int64_t with_split_terms(const UNetOptions& o, const std::vector<int64_t>& sides, int micro, const PerChannel& slab,
                         const PerChannel& copies) {
  LayerSequence block = box_layer_sequence(o, sides);
  std::vector<int64_t> extra(block.layers.size(), 0);
  for (size_t i = 0; i < block.layers.size(); ++i) {
    Layer& l = block.layers[i];
    if (l.kind != LayerKind::kConv || o.kernel == 1) continue;
    std::vector<int64_t> e;
    for (int64_t s : sides) e.push_back(s * l.in_side / block.input_side);
    int64_t padded = 1;
    for (int64_t x : e) padded *= x + 2;
    l.saved_bytes += 4 * l.in_channels * slab(e);
    extra[i] = 4 * l.in_channels * (i == 0 ? padded : copies(e));
  }
  int64_t state = 0;
  for (const Layer& l : block.layers) state += layer_bytes(l, 0, true);
  return (stage_bytes(block, 0, block.size() - 1, 1, StageMemoryOptions{}.with_extra_bytes(extra)) - state) * micro;
}

// A convolution's backward copies in 2-D: the rebuilt padded input and its gradient, each
// (e0 + 2)(e1 + 2), and the adjoint's copy without the second axis' halo, (e0 + 2)·e1; the
// first convolution (the network input's) rebuilds its padded input only. 3-D likewise.
int64_t copies_2d(const std::vector<int64_t>& e) { return 2 * (e[0] + 2) * (e[1] + 2) + (e[0] + 2) * e[1]; }
int64_t copies_3d(const std::vector<int64_t>& e) {
  return 2 * (e[0] + 2) * (e[1] + 2) * (e[2] + 2) + (e[0] + 2) * e[1] * e[2] + (e[0] + 2) * (e[1] + 2) * e[2];
}

// The halo-slab term on split meshes, against slab bytes counted by hand. unet-tiny (4 levels,
// 16 filters, two 3×3 convolutions per level, 4 input bands) on a 64² input has 14 K > 1
// convolutions; their input channels, by the side they run at:
//   side 64: enc0 4, 16;   dec0 32, 16    Σ  68
//   side 32: enc1 16, 32;  dec1 64, 32    Σ 144
//   side 16: enc2 32, 64;  dec2 128, 64   Σ 288
//   side  8: enc3 64, 128                 Σ 192
// A convolution keeps two slabs of width 1 per split axis (the planner's interior worst case),
// each C_in × (the block's cross-section, including earlier axes' halos) floats:
//   2 × 1 (block s/2 × s):   2 rows of s                          → 2s per channel;
//   2 × 2 (block s/2 × s/2): 2 rows of s/2, then 2 columns of s/2 + 2 → 2s + 4 per channel.
// Everything else is the one-process model on the block (with_split_terms above), plus each
// convolution's backward copies beside its layer (copies_2d), which the plan takes at its
// worst layer.
TEST(SpatialPlan, HaloSlabsAddTheirBytesOnSplitMeshes) {
  const UNetOptions k3 = unet_preset("unet-tiny").with_padding(Padding::kSame);
  const UNetOptions k1 = UNetOptions(k3).with_kernel(1);
  const auto opts = SpatialPlanOptions().with_micro_batch(3);
  const int64_t sum_channels_by_side = 68 * 64 + 144 * 32 + 288 * 16 + 192 * 8;
  const int64_t sum_channels = 68 + 144 + 288 + 192;
  const int64_t slabs_2x1 = 4 * 2 * sum_channels_by_side;
  const int64_t slabs_2x2 = 4 * (2 * sum_channels_by_side + 4 * sum_channels);

  const LayerSequence seq = unet_layer_sequence(k3, 64), seq_k1 = unet_layer_sequence(k1, 64);
  ASSERT_EQ(spatial_plan(seq, {1, 1}, opts).activation_bytes, spatial_plan(seq_k1, {1, 1}, opts).activation_bytes)
      << "the reference for 2 × 1 assumes the layer model's activations do not depend on K";
  // Per layer, the same slabs: 2 rows of e1 (2 × 1); 2 rows of e1, then 2 columns of e0 + 2 (2 × 2).
  auto rows = [](const std::vector<int64_t>& e) { return 2 * e[1]; };
  auto rows_and_columns = [](const std::vector<int64_t>& e) { return 2 * e[1] + 2 * (e[0] + 2); };
  const auto no_copies = [](const std::vector<int64_t>&) { return int64_t{0}; };
  ASSERT_EQ(with_split_terms(k3, {32, 64}, 3, rows, no_copies) - with_split_terms(k3, {32, 64}, 3, no_copies, no_copies),
            3 * slabs_2x1);
  ASSERT_EQ(with_split_terms(k3, {32, 32}, 3, rows_and_columns, no_copies) -
                with_split_terms(k3, {32, 32}, 3, no_copies, no_copies),
            3 * slabs_2x2);
  // The plans: those slabs kept, the backward copies beside the worst layer.
  EXPECT_EQ(spatial_plan(seq, {2, 1}, opts).activation_bytes, with_split_terms(k3, {32, 64}, 3, rows, copies_2d));
  const SpatialPlan mesh = spatial_plan(seq, {2, 2}, opts);
  ASSERT_EQ(mesh.largest_block, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(mesh.activation_bytes, with_split_terms(k3, {32, 32}, 3, rows_and_columns, copies_2d));
}

// The same term in 3-D, where each axis' slab carries the halos of the axes before it.
// unet3d-tiny (3 levels, 16 filters, two 3×3×3 convolutions per level, one input channel) on a
// 32³ input has 10 K > 1 convolutions; their input channels by the side t they run at:
//   t 32: enc0 1, 16;  dec0 32, 16   Σ 65
//   t 16: enc1 16, 32; dec1 64, 32   Σ 144
//   t  8: enc2 32, 64                Σ 96
// On a 2 × 2 × 2 mesh a block is b = t/2 per axis; its kept slabs per channel, two per axis:
//   2 · (b·b  +  (b + 2)·b  +  (b + 2)·(b + 2)) = 2 · (3b² + 6b + 4)
//   b 16: 1736,  b 8: 488,  b 4: 152 floats.
// Everything else is the one-process model on the 16³ block, plus the backward copies (copies_3d).
TEST(SpatialPlan, HaloSlabsOfATwoByTwoByTwoMeshAreCountedPerAxis) {
  const UNetOptions k3 = unet_preset("unet3d-tiny").with_padding(Padding::kSame);
  const auto opts = SpatialPlanOptions().with_micro_batch(2);
  const int64_t slab_floats = 65 * 1736 + 144 * 488 + 96 * 152;
  ASSERT_EQ(slab_floats, 197704);
  const SpatialPlan mesh = spatial_plan(unet_layer_sequence(k3, 32), {2, 2, 2}, opts);
  ASSERT_EQ(mesh.largest_block, (std::vector<int64_t>{16, 16, 16}));
  const SpatialPlan block = spatial_plan(unet_layer_sequence(k3, 16), {1, 1, 1}, opts);
  EXPECT_EQ(mesh.state_bytes, block.state_bytes);
  auto slabs = [](const std::vector<int64_t>& e) {
    return 2 * (e[1] * e[2] + (e[0] + 2) * e[2] + (e[0] + 2) * (e[1] + 2));
  };
  const auto no_copies = [](const std::vector<int64_t>&) { return int64_t{0}; };
  ASSERT_EQ(with_split_terms(k3, {16, 16, 16}, 2, slabs, no_copies) -
                with_split_terms(k3, {16, 16, 16}, 2, no_copies, no_copies),
            2 * 4 * slab_floats);
  EXPECT_EQ(mesh.activation_bytes, with_split_terms(k3, {16, 16, 16}, 2, slabs, copies_3d));
}

TEST(SpatialPlan, HaloTimeIsLatencyPerMessagePlusBytesOverBandwidth) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 128);
  const SpatialPlan bytes_only = spatial_plan(seq, {4, 1}, SpatialPlanOptions().with_latency_seconds(0).with_bytes_per_second(1e6));
  const int64_t busiest = *std::max_element(bytes_only.rank_halo_bytes.begin(), bytes_only.rank_halo_bytes.end());
  EXPECT_DOUBLE_EQ(bytes_only.halo_seconds, double(busiest) / 1e6);
  const SpatialPlan latency_only =
      spatial_plan(seq, {4, 1}, SpatialPlanOptions().with_latency_seconds(1).with_bytes_per_second(1e30));
  EXPECT_NEAR(latency_only.halo_seconds, 2.0 * latency_only.exchanges, 1e-9);  // middle ranks: two neighbours
  // 14 convolutions, forward and backward, except the first one's backward.
  EXPECT_EQ(latency_only.exchanges, 2 * 14 - 1);
}

TEST(SpatialPlan, RefusesValidPaddingAndBadSplits) {
  const LayerSequence valid = unet_layer_sequence(unet_preset("unet-tiny"), 188);
  try {
    spatial_plan(valid, {2, 1});
    FAIL() << "a valid network was split";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--padding same"), std::string::npos) << e.what();
  }
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 16);  // two units of 8
  EXPECT_THROW(spatial_plan(seq, {4, 1}), Error);
  EXPECT_THROW(spatial_plan(seq, {2}), Error);
  EXPECT_THROW(spatial_plan(seq, {2, 1}, SpatialPlanOptions().with_micro_batch(0)), Error);
}

constexpr int64_t kMiB = int64_t{1} << 20;

// One tile of 512 + 2ε that must be seen whole, four devices, too little memory for it on one.
PlanOptions one_big_tile(int64_t memory) {
  return PlanOptions(same_tiny(), {512, 512}, 4, memory).with_tile_inset(512).with_baseline_bytes(0);
}

TEST(PlanSpatial, SplitsATileThatFitsNoDeviceWhenItIsFasterThanAPipeline) {
  const LayerSequence seq = unet_layer_sequence(same_tiny(), 512 + 2 * unet_halo(same_tiny()));
  const int64_t one_device = spatial_plan(seq, {1, 1}).bytes;
  const PlanOptions o = one_big_tile(one_device / 2);
  const Layout L = plan(o);
  ASSERT_GT(L.spatial, 1);
  EXPECT_EQ(L.stages, 1);
  EXPECT_EQ(L.devices_used, L.spatial * L.data_parallel);
  EXPECT_LE(L.devices_used, 4);
  EXPECT_LE(L.peak_memory_bytes, o.device_memory_bytes);
  // The prediction is spatial_plan's for the chosen mesh.
  const SpatialPlan p = spatial_plan(seq, L.spatial_mesh);
  EXPECT_EQ(L.peak_memory_bytes, p.bytes);
  EXPECT_EQ(L.halo_bytes_per_step, p.halo_bytes);
  EXPECT_GT(L.halo_bytes_per_step, 0);
  const std::string why = L.reasons[1];
  EXPECT_EQ(why.rfind("spatial: sp = ", 0), 0u) << why;
  // One tile per step: a pipeline idles (K − 1)/K of the time, so spatial is faster.
  const Layout pipeline = plan(PlanOptions(o).with_consider_spatial(false));
  EXPECT_EQ(pipeline.spatial, 1);
  EXPECT_GT(pipeline.stages, 1);
  EXPECT_LT(L.pass_seconds, pipeline.pass_seconds);
  bool said = false;
  for (const std::string& r : pipeline.reasons) said = said || r == "spatial: not considered (as asked)";
  EXPECT_TRUE(said);
}

TEST(PlanSpatial, NotChosenWhenHalosCostMoreThanTheyGainAndSaysWhatItWouldCost) {
  // Many tiles that fit one device: a split gains only the smaller halo overhead E of a larger
  // tile, and here every message costs 50 ms.
  const PlanOptions o = PlanOptions(same_tiny(), {4096, 4096}, 4, 4096 * kMiB).with_message_latency_seconds(0.05);
  const Layout L = plan(o);
  EXPECT_EQ(L.spatial, 1);
  bool said = false;
  for (const std::string& r : L.reasons) said = said || r.rfind("spatial: not chosen", 0) == 0;
  EXPECT_TRUE(said);
  // With cheap messages the larger tile's smaller E wins (the model's choice, by a few per cent).
  EXPECT_GT(plan(PlanOptions(o).with_message_latency_seconds(0)).spatial, 1);
  // A `valid` network is never split.
  const Layout valid = plan(PlanOptions(unet_preset("unet-tiny"), {4096, 4096}, 4, 4096 * kMiB));
  EXPECT_EQ(valid.spatial, 1);
}

TEST(SpatialMeshes, OneDimensionalSplitAndTheMostNearlyCubic) {
  using Meshes = std::vector<std::vector<int>>;
  EXPECT_EQ(spatial_meshes(1, 2), (Meshes{{1, 1}}));
  EXPECT_EQ(spatial_meshes(2, 2), (Meshes{{2, 1}}));
  EXPECT_EQ(spatial_meshes(4, 2), (Meshes{{4, 1}, {2, 2}}));
  EXPECT_EQ(spatial_meshes(6, 2), (Meshes{{6, 1}, {3, 2}}));
  EXPECT_EQ(spatial_meshes(8, 3), (Meshes{{8, 1, 1}, {2, 2, 2}}));
  EXPECT_EQ(spatial_meshes(5, 2), (Meshes{{5, 1}}));
}

}  // namespace
}  // namespace tessera::parallel
