// The planner's forward-only inference memory model (inference_bytes), which `tessera infer
// --tile auto` holds to a budget: it must grow with the tile and the batch, price a thin tile
// below a cube, and keep the whole-network stage model it is built on.
#include <gtest/gtest.h>

#include "tessera/core/error.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"

namespace tessera::parallel {
namespace {

TEST(InferenceMemory, GrowsWithTileSide) {
  for (const char* preset : {"unet-tiny", "unet-small", "unet3d-tiny"}) {
    const UNetOptions m = unet_preset(preset);
    const int64_t a = unet_alignment(m);
    int64_t previous = 0;
    for (int64_t s = a; s <= 32 * a; s += a) {
      const int64_t bytes = inference_bytes(m, Index(size_t(m.dims), s), 1);
      EXPECT_GT(bytes, previous) << preset << " side " << s;
      previous = bytes;
    }
  }
}

TEST(InferenceMemory, GrowsWithBatchAndKeepsOneCopyOfTheWeights) {
  const UNetOptions m = unet_preset("unet-tiny");
  const int64_t one = inference_bytes(m, {128, 128}, 1), two = inference_bytes(m, {128, 128}, 2);
  const int64_t weights = 4 * unet_parameter_count(m);
  EXPECT_NEAR(double(two - weights), 2.0 * double(one - weights), 1.0);
}

TEST(InferenceMemory, ThinTileCostsLessThanACube) {
  const UNetOptions m = unet_preset("unet3d-tiny");
  EXPECT_LT(inference_bytes(m, {4, 64, 64}, 1), inference_bytes(m, {64, 64, 64}, 1));
  EXPECT_LT(inference_bytes(m, {4, 64, 64}, 1), inference_bytes(m, {4, 64, 128}, 1));
  // The order of the axes does not matter.
  EXPECT_EQ(inference_bytes(m, {4, 64, 32}, 1), inference_bytes(m, {32, 4, 64}, 1));
}

TEST(InferenceMemory, ContainsTheWholeNetworkStageModel) {
  // A cube tile: at least stage_bytes()' inference model for one stage of every layer, and
  // no more than that plus a few input/output-sized buffers, times the allocator's slack.
  const UNetOptions m = unet_preset("unet-small");
  const int64_t t = 192, side = t + unet_remainder(m) + 2 * unet_halo(m);
  const LayerSequence seq = unet_layer_sequence(m, side);
  const int64_t stage = stage_bytes(seq, 0, seq.size() - 1, 1, StageMemoryOptions{}.with_training(false));
  const int64_t bytes = inference_bytes(m, {t, t}, 1);
  EXPECT_GE(bytes, stage);
  const int64_t buffers = 8 * (seq.layers.front().in_elements + seq.layers.back().out_elements) * 4;
  EXPECT_LE(bytes, kInferenceAllocatorSlack * double(stage + buffers));
}

}  // namespace
}  // namespace tessera::parallel
