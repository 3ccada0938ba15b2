#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "memory_image.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/tensor_io.hpp"

namespace tessera {
namespace {

using testing::MemoryImage;
using testing::MemorySink;

float pattern(int c, const Index& at) {
  float v = 0.3f * float(c);
  for (size_t a = 0; a < at.size(); ++a) v += std::sin(0.13f * float(at[a]) * float(a + 1) + float(c));
  return v;
}

TEST(TiledInference, StitchedLogitsEqualOneWholeImageForward2d) {
  torch::manual_seed(3);
  const auto o = unet_preset("unet-tiny").with_base_filters(8).with_classes(3);
  UNet net(o);
  MemoryImage image({150, 97}, 4, pattern);
  const auto norm = identity_normalization(4);
  for (int64_t tile : {16, 32, 64}) {
    auto whole = forward_whole_image(net, image, norm, tile);
    auto tiled = infer_logits(net, image, norm, InferenceOptions().with_tile(tile).with_progress(false).with_batch(2));
    ASSERT_EQ(tiled.sizes(), whole.sizes());
    EXPECT_FALSE(torch::isnan(tiled).any().item<bool>()) << "a pixel was never written, tile " << tile;
    EXPECT_LE((tiled - whole).abs().max().item<float>(), 1e-4) << "tile " << tile;
  }
}

TEST(TiledInference, StitchedLogitsEqualOneWholeImageForward3d) {
  torch::manual_seed(4);
  const auto o = unet_preset("unet3d-tiny").with_base_filters(4);
  UNet net(o);
  MemoryImage image({21, 30, 26}, 1, pattern);
  const auto norm = identity_normalization(1);
  auto whole = forward_whole_image(net, image, norm, 8);
  auto tiled = infer_logits(net, image, norm, InferenceOptions().with_tile(8).with_progress(false));
  EXPECT_LE((tiled - whole).abs().max().item<float>(), 1e-4);
}

TEST(TiledInference, LabelsDoNotDependOnTheTileSize) {
  torch::manual_seed(5);
  const auto o = unet_preset("unet-tiny").with_base_filters(8).with_classes(4);
  UNet net(o);
  MemoryImage image({120, 133}, 4, pattern);
  const auto norm = identity_normalization(4);
  MemorySink a({120, 133}), b({120, 133});
  infer_labels(net, image, norm, a, InferenceOptions().with_tile(16).with_progress(false));
  infer_labels(net, image, norm, b, InferenceOptions().with_tile(64).with_progress(false));
  for (int w : a.writes) ASSERT_EQ(w, 1);  // every pixel written exactly once
  EXPECT_EQ(a.labels, b.labels);
  std::set<uint8_t> seen(a.labels.begin(), a.labels.end());
  EXPECT_GT(seen.size(), 1u) << "a constant answer would make this test meaningless";
}

TEST(TiledInference, NodataPixelsGetTheNodataLabel) {
  torch::manual_seed(6);
  UNet net(unet_preset("unet-tiny").with_base_filters(4));
  MemoryImage image({40, 40}, 4, [](int c, const Index& at) {
    return at[0] < 10 && c == 2 ? std::numeric_limits<float>::quiet_NaN() : pattern(c, at);
  });
  MemorySink sink({40, 40});
  infer_labels(net, image, identity_normalization(4), sink, InferenceOptions().with_tile(16).with_progress(false));
  for (int64_t i = 0; i < 40 * 40; ++i) EXPECT_EQ(sink.labels[i] == kNoDataLabel, i / 40 < 10) << i;
}

TEST(TiledInference, SamePaddingNetworkCoversTheImage) {
  torch::manual_seed(7);
  UNet net(unet_preset("unet-tiny").with_base_filters(4).with_padding(Padding::kSame));
  MemoryImage image({50, 70}, 4, pattern);
  MemorySink sink({50, 70});
  infer_labels(net, image, identity_normalization(4), sink, InferenceOptions().with_tile(32).with_progress(false));
  for (int w : sink.writes) ASSERT_EQ(w, 1);
}

TEST(TiledInference, RejectsATileOffThePoolingGrid) {
  UNet net(unet_preset("unet-tiny").with_base_filters(4));
  MemoryImage image({40, 40}, 4, pattern);
  MemorySink sink({40, 40});
  EXPECT_THROW(infer_labels(net, image, identity_normalization(4), sink, InferenceOptions().with_tile(12)), Error);
}

}  // namespace
}  // namespace tessera
