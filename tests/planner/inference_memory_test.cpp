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
  // A cube tile: stage_bytes()' inference model for one stage of every layer, plus the tiled
  // loop's input-sized buffers: this batch's input and masks, and the next batch read ahead.
  const UNetOptions m = unet_preset("unet-small");
  const int64_t t = 192, side = t + unet_remainder(m) + 2 * unet_halo(m);
  const LayerSequence seq = unet_layer_sequence(m, side);
  const int64_t stage = stage_bytes(seq, 0, seq.size() - 1, 1, StageMemoryOptions{}.with_training(false));
  const int64_t input = seq.layers.front().in_elements * 4;
  const int64_t alone = inference_bytes(m, {t, t}, 1, false), read_ahead = inference_bytes(m, {t, t}, 1, true);
  EXPECT_GT(alone, stage);
  EXPECT_LE(alone, stage + 2 * input);
  EXPECT_GT(read_ahead, alone + input);
  EXPECT_LE(read_ahead, alone + 3 * input);
}

TEST(InferenceMemory, TheBlockInputStaysBesideTheBlocksLaterLayers) {
  // run_layers keeps a convolution block's input until the block ends: the working set at a
  // block's second convolution holds it beside that convolution's input and output.
  const UNetOptions m = unet_preset("unet-tiny");
  const LayerSequence seq = unet_layer_sequence(m, 188);
  const int64_t stage = stage_bytes(seq, 0, seq.size() - 1, 1, StageMemoryOptions{}.with_training(false));
  const int64_t weights = 4 * seq.parameter_count();
  for (int i = 0; i < seq.size(); ++i) {
    const Layer& l = seq.layers[size_t(i)];
    if (l.kind != LayerKind::kConv || !l.name.ends_with(".conv1")) continue;
    int j = i;
    while (!seq.layers[size_t(j)].name.ends_with(".conv0")) --j;
    const Layer& conv0 = seq.layers[size_t(j)];
    EXPECT_GE(stage - weights, 4 * (conv0.in_elements + l.in_elements + l.out_elements)) << l.name;
  }
}

}  // namespace
}  // namespace tessera::parallel
