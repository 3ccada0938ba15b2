#include "tessera/core/layer_sequence.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "tessera/core/error.hpp"
#include "tessera/core/unet.hpp"

namespace tessera {
namespace {

std::vector<UNetOptions> variants() {
  std::vector<UNetOptions> v;
  for (const auto& name : unet_preset_names()) v.push_back(unet_preset(name));
  v.push_back(unet_preset("unet-tiny").with_norm(Norm::kGroup));
  v.push_back(unet_preset("unet-tiny").with_decoder(Decoder::kUpsample).with_norm(Norm::kBatch));
  v.push_back(unet_preset("unet-small").with_padding(Padding::kSame));
  v.push_back(unet_preset("unet3d-tiny").with_decoder(Decoder::kUpsample).with_convs_per_level(3));
  v.push_back(UNetOptions{}.with_levels(3).with_kernel(5).with_base_filters(8));
  return v;
}

// A valid network reads S + r + 2ε for an inset S; a `same` one keeps sizes, so any multiple
// of the alignment is an input.
int64_t valid_input(const UNetOptions& o, int64_t inset) {
  return o.padding == Padding::kValid ? inset + unet_remainder(o) + 2 * unet_halo(o) : inset;
}

TEST(LayerSequence, ParametersAndLayerCountMatchTheSpec) {
  for (const auto& o : variants()) {
    const auto seq = unet_layer_sequence(o, valid_input(o, 4 * unet_alignment(o)));
    EXPECT_EQ(seq.parameter_count(), unet_parameter_count(o)) << o.levels << " " << o.dims;
    EXPECT_EQ(seq.size(), unet_layer_count(o));
  }
}

TEST(LayerSequence, ValidNetworkMapsSPlusRPlus2EpsToSPlusR) {
  for (const auto& o : variants()) {
    const int64_t a = unet_alignment(o), r = unet_remainder(o);
    for (int64_t s : {a, 3 * a, 10 * a}) {
      const auto seq = unet_layer_sequence(o, valid_input(o, s));
      const int64_t expected = o.padding == Padding::kValid ? s + r : s;
      EXPECT_EQ(seq.output_side, expected);
      EXPECT_EQ(seq.layers.back().out_side, expected);
      EXPECT_EQ(seq.layers.front().in_side, valid_input(o, s));
      for (size_t i = 1; i < seq.layers.size(); ++i) EXPECT_EQ(seq.layers[i].in_side, seq.layers[i - 1].out_side);
    }
  }
}

TEST(LayerSequence, SamePaddingFlopsPerPixelEqualTheSpec) {
  for (auto o : variants()) {
    o.padding = Padding::kSame;
    const int64_t side = 8 * unet_alignment(o);
    const auto seq = unet_layer_sequence(o, side);
    const double per_pixel = seq.flops() / std::pow(double(side), o.dims);
    EXPECT_NEAR(per_pixel / unet_flops_per_output_pixel(o), 1.0, 1e-12);
  }
}

TEST(LayerSequence, ValidFlopsPerOutputPixelFallTowardsTheSpec) {
  const auto o = unet_preset("unet-small");
  double previous = 1e300;
  for (int64_t s : {64, 256, 1024, 4096, 16384}) {
    const auto seq = unet_layer_sequence(o, valid_input(o, s));
    const double ratio = seq.flops() / std::pow(double(seq.output_side), 2) / unet_flops_per_output_pixel(o);
    EXPECT_GT(ratio, 1.0) << s;  // the halo is recomputed
    EXPECT_LT(ratio, previous) << s;
    previous = ratio;
  }
  EXPECT_LT(previous, 1.05);
}

// L = 2, n_c = 1, f = 2, 3×3 valid, 1 band, 2 classes, input 14: worked out by hand.
TEST(LayerSequence, TinyNetworkByHand) {
  const auto o = UNetOptions{}.with_levels(2).with_convs_per_level(1).with_base_filters(2).with_in_channels(1).with_classes(2);
  const auto seq = unet_layer_sequence(o, 14);
  const std::vector<std::string> names{"enc0.conv0", "enc0.relu0", "pool0", "enc1.conv0", "enc1.relu0",
                                       "up0", "dec0.concat", "dec0.conv0", "dec0.relu0", "head"};
  const std::vector<int64_t> sides{12, 12, 6, 4, 4, 8, 8, 6, 6, 6};
  const std::vector<int64_t> params{20, 0, 0, 76, 0, 34, 0, 74, 0, 6};
  const std::vector<double> flops{5184, 0, 0, 2304, 0, 1024, 0, 5184, 0, 288};
  const std::vector<int64_t> saved{0, 1152, 864, 0, 256, 0, 1024, 0, 288, 288};
  ASSERT_EQ(seq.size(), 10);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(seq.layers[i].name, names[i]);
    EXPECT_EQ(seq.layers[i].out_side, sides[i]) << names[i];
    EXPECT_EQ(seq.layers[i].params, params[i]) << names[i];
    EXPECT_EQ(seq.layers[i].flops, flops[i]) << names[i];
    EXPECT_EQ(seq.layers[i].saved_bytes, saved[i]) << names[i];
  }
  ASSERT_EQ(seq.skips.size(), 1u);
  EXPECT_EQ(seq.skips[0].producer, 1);
  EXPECT_EQ(seq.skips[0].consumer, 6);
  EXPECT_EQ(seq.skips[0].elements, 2 * 12 * 12);
  EXPECT_EQ(seq.skips[0].cropped_elements, 2 * 8 * 8);
  EXPECT_EQ(layer_bytes(seq.layers[3], 2, true), 16 * 76);
  EXPECT_EQ(layer_bytes(seq.layers[1], 3, true), 3 * 1152);
  EXPECT_EQ(layer_bytes(seq.layers[3], 2, false), 4 * 76);
}

TEST(LayerSequence, SkipsRunFromEncoderReluToDecoderConcat) {
  const auto o = unet_preset("unet-small");
  const auto seq = unet_layer_sequence(o, valid_input(o, 64));
  ASSERT_EQ(int(seq.skips.size()), o.levels - 1);
  for (size_t l = 0; l < seq.skips.size(); ++l) {
    const auto& s = seq.skips[l];
    EXPECT_EQ(seq.layers[s.producer].name, "enc" + std::to_string(l) + ".relu" + std::to_string(o.convs_per_level - 1));
    EXPECT_EQ(seq.layers[s.consumer].name, "dec" + std::to_string(l) + ".concat");
    EXPECT_EQ(seq.layers[s.consumer].out_channels, 2 * seq.layers[s.producer].out_channels);
  }
}

TEST(LayerSequence, InvalidInputSideNamesTheField) {
  const auto o = unet_preset("unet-small");
  try {
    unet_layer_sequence(o, 573);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input_side"), std::string::npos) << e.what();
  }
}

// Independent check against the LibTorch module: each layer's parameters are the module's
// of the same name, and the real output has the predicted side.
TEST(LayerSequence, MatchesTheLibTorchModule) {
  for (auto o : {unet_preset("unet-tiny").with_norm(Norm::kGroup),
                 unet_preset("unet-tiny").with_decoder(Decoder::kUpsample),
                 unet_preset("unet3d-tiny").with_base_filters(4)}) {
    const int64_t side = valid_input(o, unet_alignment(o));
    const auto seq = unet_layer_sequence(o, side);
    UNet net(o);
    for (const auto& l : seq.layers) {
      int64_t n = 0;
      for (const auto& p : net->named_parameters())
        if (p.key().rfind(l.name + ".", 0) == 0) n += p.value().numel();
      EXPECT_EQ(n, l.params) << l.name;
    }
    std::vector<int64_t> shape{1, o.in_channels};
    for (int d = 0; d < o.dims; ++d) shape.push_back(side);
    torch::NoGradGuard no_grad;
    const auto y = net->forward(torch::zeros(shape));
    for (int d = 0; d < o.dims; ++d) EXPECT_EQ(y.size(2 + d), seq.output_side);
  }
}

}  // namespace
}  // namespace tessera
