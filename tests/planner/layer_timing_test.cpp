// The calibration times each layer on the micro-batch the priced run uses
// (parallel::LayerTiming, `tessera plan --calibrate --calibration-batch`): a one-layer stage
// handed `tiles` tiles holds `tiles` times the activations. Observed without a clock: the
// largest total of live tensors (the tensor cache counts every CPU buffer) while the layers
// are timed on 4 tiles is about 4 × that on one tile.
//
// Why it can fail: an arrival made for one tile whatever `timing.tiles` says (OneLayer::arrive
// with input_shape(1)) leaves the peak at 1 × (shown by planting it).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tessera/core/cpu_tensor_cache.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/parallel/modes/memory_calibration.hpp"

namespace tessera::parallel {
namespace {

int64_t peak_live_bytes_while_timing(const UNetImpl& net, const LayerSequence& seq, const LayerTiming& timing) {
  const CpuTensorCacheScope cache(/*min_bytes=*/1);
  const std::vector<double> seconds = measure_layer_seconds(net, seq, timing);
  EXPECT_EQ(seconds.size(), size_t(seq.size()));
  return CpuTensorCacheScope::stats().peak_live_bytes;
}

TEST(LayerTiming, EachLayerRunsTheMicroBatchItIsGiven) {
  torch::manual_seed(0);
  const UNetOptions o = unet_preset("unet-tiny");
  UNet net(o);
  const LayerSequence seq = unet_layer_sequence(o, 140);  // bench simulate's input side
  const int64_t one = peak_live_bytes_while_timing(*net, seq, {1, false});
  const int64_t four = peak_live_bytes_while_timing(*net, seq, {4, true});
  EXPECT_GT(four, 3 * one) << "one tile " << one << " B, four tiles " << four << " B";
  EXPECT_LT(four, 5 * one) << "one tile " << one << " B, four tiles " << four << " B";
}

TEST(LayerTiming, RefusesNoTiles) {
  const UNetOptions o = unet_preset("unet-tiny");
  UNet net(o);
  EXPECT_THROW(measure_layer_seconds(*net, unet_layer_sequence(o, 140), {0, false}), Error);
}

}  // namespace
}  // namespace tessera::parallel
