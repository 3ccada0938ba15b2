#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "memory_image.hpp"
#include "tessera/core/cpu_tensor_cache.hpp"
#include "tessera/core/memory_model.hpp"
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

// ---------------------------------------------------------------------------------------
// The reference: one forward pass of the textbook U-Net over the whole reflect-padded image,
// written here from plain torch calls and the network's named parameters. It shares no code
// with the tiled path: not TileGrid, not read_window / reflect_index, not the UNet modules
// (whose transposed convolution runs as a 1×1 convolution + depth-to-space), not
// unet_halo / unet_remainder / center_crop. Halo and valid size come from DESIGN.md's
// formulas, and the padded size does not depend on the tile at all.
namespace F = torch::nn::functional;

// (1, channels, extent...) straight from the formula.
torch::Tensor formula_image(const Index& extent, int channels, const std::function<float(int, const Index&)>& value) {
  std::vector<int64_t> shape{1, channels};
  shape.insert(shape.end(), extent.begin(), extent.end());
  int64_t n = 1;
  for (int64_t e : extent) n *= e;
  std::vector<float> values(size_t(n * channels));
  Index at(extent.size());
  for (int c = 0; c < channels; ++c)
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t a = int64_t(extent.size()) - 1, rest = i; a >= 0; --a) {
        at[a] = rest % extent[a];
        rest /= extent[a];
      }
      values[size_t(c * n + i)] = value(c, at);
    }
  return torch::from_blob(values.data(), shape, torch::kFloat32).clone();
}

// ε = (3·2^(L−2) − 1)·d·n_c, d = K − 1 − 2P (valid: P = 0).
int64_t halo_formula(const UNetOptions& o) {
  return ((int64_t{3} << (o.levels - 2)) - 1) * (o.kernel - 1) * o.convs_per_level;
}

// Valid output sides are S + r, S a multiple of 2^(L−1): the decoder turns a bottom side b
// into 2^(L−1)·b − d·n_c·(2^(L−1) − 1), so r = d·n_c mod 2^(L−1) (4 for L ≥ 4, 3×3, n_c = 2).
int64_t smallest_valid_output(const UNetOptions& o, int64_t n) {
  const int64_t align = int64_t{1} << (o.levels - 1), r = (o.kernel - 1) * o.convs_per_level % align;
  int64_t m = n;
  while (m % align != r) ++m;
  return m;
}

// Reflect padding (no edge repeat) of the spatial axes by before[a] / after[a]. F::pad can
// reflect by at most side − 1 at a time; folding again continues the same mirror image.
torch::Tensor reflect_pad(torch::Tensor x, Index before, Index after) {
  const int d = int(before.size());
  while (*std::max_element(before.begin(), before.end()) > 0 || *std::max_element(after.begin(), after.end()) > 0) {
    std::vector<int64_t> pad;  // F::pad: last axis first
    for (int a = d - 1; a >= 0; --a) {
      const int64_t most = x.size(2 + a) - 1, lo = std::min(before[a], most), hi = std::min(after[a], most);
      pad.insert(pad.end(), {lo, hi});
      before[a] -= lo;
      after[a] -= hi;
    }
    x = F::pad(x, F::PadFuncOptions(pad).mode(torch::kReflect));
  }
  return x;
}

torch::Tensor centre_crop_to(const torch::Tensor& x, const torch::Tensor& like) {
  torch::Tensor y = x;
  for (int64_t a = 2; a < x.dim(); ++a) y = y.narrow(a, (x.size(a) - like.size(a)) / 2, like.size(a));
  return y;
}

// The U-Net of core/src/unet.cpp (valid padding, no normalisation, transposed decoder),
// layer by layer from its parameters: encoder blocks of n_c × (conv → ReLU) with 2×2 max
// pooling, decoder: 2×2 stride-2 transposed conv, [cropped skip, upsampled] → block, 1×1 head.
torch::Tensor textbook_unet(UNet& net, torch::Tensor x) {
  const UNetOptions& o = net->options();
  const bool two = o.dims == 2;
  auto params = net->named_parameters();
  auto w = [&](const std::string& name) { return params[name].detach().contiguous(); };
  auto conv = [&](const torch::Tensor& in, const std::string& layer) {
    return two ? F::conv2d(in, w(layer + ".weight"), F::Conv2dFuncOptions().bias(w(layer + ".bias")))
               : F::conv3d(in, w(layer + ".weight"), F::Conv3dFuncOptions().bias(w(layer + ".bias")));
  };
  auto block = [&](torch::Tensor in, const std::string& name) {
    for (int i = 0; i < o.convs_per_level; ++i) in = F::relu(conv(in, name + ".conv" + std::to_string(i)));
    return in;
  };
  std::vector<torch::Tensor> skips;
  for (int l = 0; l < o.levels; ++l) {
    x = block(x, "enc" + std::to_string(l));
    if (l == o.levels - 1) break;
    for (int64_t a = 2; a < x.dim(); ++a) EXPECT_EQ(x.size(a) % 2, 0) << "odd side before pooling, level " << l;
    skips.push_back(x);
    x = two ? F::max_pool2d(x, F::MaxPool2dFuncOptions(2)) : F::max_pool3d(x, F::MaxPool3dFuncOptions(2));
  }
  for (int l = o.levels - 2; l >= 0; --l) {
    const std::string up = "up" + std::to_string(l);
    const torch::Tensor weight = w(up + ".weight"), bias = w(up + ".bias");
    x = two ? F::conv_transpose2d(x, weight, F::ConvTranspose2dFuncOptions().bias(bias).stride(2))
            : F::conv_transpose3d(x, weight, F::ConvTranspose3dFuncOptions().bias(bias).stride(2));
    x = block(torch::cat({centre_crop_to(skips[l], x), x}, 1), "dec" + std::to_string(l));
  }
  return conv(x, "head");
}

// Logits (classes, extent...) of the textbook U-Net over the whole image, reflect-padded by
// ε before and up to the smallest valid output side plus ε after, cropped to the image.
torch::Tensor independent_reference(UNet& net, const Index& extent, int channels,
                                    const std::function<float(int, const Index&)>& value) {
  const UNetOptions& o = net->options();
  EXPECT_TRUE(o.padding == Padding::kValid && o.norm == Norm::kNone && o.decoder == Decoder::kTransposed)
      << "the reference is written for valid padding, no norm, a transposed decoder";
  torch::NoGradGuard no_grad;
  const int64_t halo = halo_formula(o);
  Index before(extent.size(), halo), after(extent.size());
  for (size_t a = 0; a < extent.size(); ++a) after[a] = smallest_valid_output(o, extent[a]) + halo - extent[a];
  torch::Tensor logits = textbook_unet(net, reflect_pad(formula_image(extent, channels, value), before, after))[0];
  for (size_t a = 0; a < extent.size(); ++a) {
    EXPECT_EQ(logits.size(1 + a), smallest_valid_output(o, extent[a])) << "axis " << a;
    logits = logits.narrow(1 + a, 0, extent[a]);
  }
  return logits.contiguous();
}

// Labels must equal the reference's argmax wherever its top two logits are further apart
// than the logit tolerance (a nearer tie may flip either way); returns the mismatches.
int64_t label_mismatches(const std::vector<uint8_t>& labels, const torch::Tensor& reference, float tolerance,
                         int64_t* near_ties) {
  const auto top2 = std::get<0>(reference.topk(2, 0));
  const auto clear = ((top2[0] - top2[1]) > 2 * tolerance).reshape({-1});
  const auto want = reference.argmax(0).reshape({-1}).to(torch::kUInt8);
  const auto got = torch::from_blob(const_cast<uint8_t*>(labels.data()), {int64_t(labels.size())}, torch::kUInt8);
  *near_ties = clear.logical_not().sum().item<int64_t>();
  return ((got != want) & clear).sum().item<int64_t>();
}

constexpr float kLogitTolerance = 1e-4f;

TEST(TiledInference, StitchedLogitsAndLabelsEqualAnIndependentWholeImageForward2d) {
  torch::manual_seed(3);
  const auto o = unet_preset("unet-tiny").with_base_filters(8).with_classes(3);
  UNet net(o);
  const Index extent{150, 97};
  MemoryImage image(extent, 4, pattern);
  const auto norm = identity_normalization(4);
  const torch::Tensor reference = independent_reference(net, extent, 4, pattern);
  for (int64_t tile : {16, 32, 64}) {
    const auto options = InferenceOptions().with_tile(tile).with_progress(false).with_batch(2);
    auto tiled = infer_logits(net, image, norm, options);
    ASSERT_EQ(tiled.sizes(), reference.sizes());
    EXPECT_FALSE(torch::isnan(tiled).any().item<bool>()) << "a pixel was never written, tile " << tile;
    const float diff = (tiled - reference).abs().max().item<float>();
    EXPECT_LE(diff, kLogitTolerance) << "tile " << tile;
    MemorySink sink(extent);
    infer_labels(net, image, norm, sink, options);
    for (int w : sink.writes) ASSERT_EQ(w, 1) << "tile " << tile;
    int64_t ties = 0;
    const int64_t mismatches = label_mismatches(sink.labels, reference, kLogitTolerance, &ties);
    EXPECT_EQ(mismatches, 0) << "tile " << tile;
    std::printf("tile %lld: max |logit - reference| %.3g, %lld labels differ (%lld near ties)\n", (long long)tile, diff,
                (long long)mismatches, (long long)ties);
  }
}

TEST(TiledInference, StitchedLogitsAndLabelsEqualAnIndependentWholeImageForward3d) {
  torch::manual_seed(4);
  const auto o = unet_preset("unet3d-tiny").with_base_filters(4);
  UNet net(o);
  const Index extent{21, 30, 26};
  MemoryImage image(extent, 1, pattern);
  const auto norm = identity_normalization(1);
  const torch::Tensor reference = independent_reference(net, extent, 1, pattern);
  const auto options = InferenceOptions().with_tile(8).with_progress(false);
  auto tiled = infer_logits(net, image, norm, options);
  ASSERT_EQ(tiled.sizes(), reference.sizes());
  EXPECT_LE((tiled - reference).abs().max().item<float>(), kLogitTolerance);
  MemorySink sink(extent);
  infer_labels(net, image, norm, sink, options);
  int64_t ties = 0;
  EXPECT_EQ(label_mismatches(sink.labels, reference, kLogitTolerance, &ties), 0);
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

// `same` padding. The answer is one forward pass of the network over the whole image
// reflect-padded by the tiler's halo h (and after the image up to the pooling grid), cropped:
// what a single tile covering the image computes. Every tile zero-pads at its own edges where
// the whole pass sees image values; tiling is exact only if that reaches no kept pixel (h covers
// it) and every tile starts on the pooling grid 2^(L−1), at any tile size and image size.
torch::Tensor same_reference(UNet& net, const Index& extent, int channels, int64_t halo) {
  const UNetOptions& o = net->options();
  c10::InferenceMode guard;
  const int64_t align = int64_t{1} << (o.levels - 1);
  Index before(extent.size(), halo), after(extent.size());
  for (size_t a = 0; a < extent.size(); ++a) after[a] = (extent[a] + align - 1) / align * align - extent[a] + halo;
  torch::Tensor logits = net->forward(reflect_pad(formula_image(extent, channels, pattern), before, after))[0];
  for (size_t a = 0; a < extent.size(); ++a) logits = logits.narrow(1 + a, halo, extent[a]);
  return logits.contiguous();
}

// Tiled probabilities within 1e-5 of the whole pass's (logits within 1e-5 of their largest),
// labels equal (but for near ties), for every tile side; prints each side's figures.
void expect_same_tiling_exact(const UNetOptions& o, const Index& extent, const std::vector<int64_t>& tiles) {
  torch::manual_seed(11);
  UNet net(o);
  net->eval();
  MemoryImage image(extent, o.in_channels, pattern);
  const auto norm = identity_normalization(o.in_channels);
  const int64_t halo = make_tile_grid(o, extent, tiles.front()).options().halo;
  const torch::Tensor reference = same_reference(net, extent, o.in_channels, halo);
  const torch::Tensor reference_p = reference.softmax(0);
  const float scale = reference.abs().max().item<float>(), tolerance = 1e-5f * scale;
  for (int64_t tile : tiles) {
    const auto options = InferenceOptions().with_tile(tile).with_progress(false).with_batch(2);
    const torch::Tensor tiled = infer_logits(net, image, norm, options);
    EXPECT_FALSE(torch::isnan(tiled).any().item<bool>()) << "a pixel was never written, tile " << tile;
    const float dp = (tiled.softmax(0) - reference_p).abs().max().item<float>();
    const float dl = (tiled - reference).abs().max().item<float>();
    EXPECT_LE(dp, 1e-5f) << "tile " << tile << " (halo " << halo << ")";
    EXPECT_LE(dl, tolerance) << "tile " << tile << " (halo " << halo << ")";
    MemorySink sink(extent);
    infer_labels(net, image, norm, sink, options);
    int64_t ties = 0;
    const int64_t mismatches = label_mismatches(sink.labels, reference, tolerance, &ties);
    EXPECT_EQ(mismatches, 0) << "tile " << tile;
    std::printf("%s, tile %lld, halo %lld: max |dp| %.3g, max |dlogit| / max |logit| %.3g, %lld labels differ (%lld "
                "near ties)\n",
                to_string(extent).c_str(), (long long)tile, (long long)halo, dp, dl / scale, (long long)mismatches,
                (long long)ties);
  }
}

TEST(TiledInference, SamePaddingTilesEqualOneWholeImagePass2d) {
  // unet-tiny (4 levels, pooling grid 8; reach 46, the valid halo 44), unet-small (grid 16),
  // three convolutions per level with an upsampling decoder (reach 69, valid 66), 5-wide kernels.
  // Odd image sides, tiles that do not divide them, a tile clamped to the image.
  const UNetOptions tiny = unet_preset("unet-tiny").with_base_filters(4).with_classes(3).with_padding(Padding::kSame);
  expect_same_tiling_exact(tiny, {45, 67}, {8, 16, 24, 40, 72});
  expect_same_tiling_exact(UNetOptions(tiny).with_convs_per_level(3).with_decoder(Decoder::kUpsample), {37, 29},
                           {8, 24});
  expect_same_tiling_exact(UNetOptions(tiny).with_levels(3).with_kernel(5), {33, 21}, {4, 12});
  expect_same_tiling_exact(unet_preset("unet-small").with_base_filters(2).with_padding(Padding::kSame), {51, 35},
                           {16, 48});
}

TEST(TiledInference, SamePaddingTilesEqualOneWholeImagePass3d) {
  const UNetOptions tiny3 = unet_preset("unet3d-tiny").with_base_filters(4).with_padding(Padding::kSame);
  expect_same_tiling_exact(tiny3, {13, 10, 9}, {4, 12});
  expect_same_tiling_exact(UNetOptions(tiny3).with_levels(4).with_base_filters(2), {9, 11, 7}, {8});
}

TEST(TiledInference, RejectsATileOffThePoolingGrid) {
  UNet net(unet_preset("unet-tiny").with_base_filters(4));
  MemoryImage image({40, 40}, 4, pattern);
  MemorySink sink({40, 40});
  EXPECT_THROW(infer_labels(net, image, identity_normalization(4), sink, InferenceOptions().with_tile(12)), Error);
}

// The seam between `--tile auto` and the loop it sizes: the largest total of live tensors
// of a tiled run (every CPU buffer counted by the tensor cache, the weights made before it)
// is the memory model's inference_bytes less the weights, for one tile (nothing read ahead)
// and for many (the next tile read on the reader thread meanwhile).
TEST(TiledInference, PeakLiveTensorsAreWhatTheMemoryModelPredicts) {
  torch::manual_seed(8);
  const auto o = unet_preset("unet-tiny");
  UNet net(o);
  const int64_t weights = 4 * unet_parameter_count(o);
  for (const auto& [side, tile] : {std::pair<int64_t, int64_t>{512, 512}, {512, 128}}) {
    MemoryImage image({side, side}, 4, pattern);
    MemorySink sink({side, side});
    int64_t peak = 0;
    {
      CpuTensorCacheScope cache(1);
      infer_labels(net, image, identity_normalization(4), sink, InferenceOptions().with_tile(tile).with_progress(false));
      peak = CpuTensorCacheScope::stats().peak_live_bytes;
    }
    const Index steps = clamped_steps({side, side}, tile, unet_alignment(o));
    const int64_t predicted = inference_bytes(o, steps, 1, tile < side) - weights;
    std::printf("tile %lld of %lld²: %lld bytes live at the peak, %lld predicted\n", (long long)tile, (long long)side,
                (long long)peak, (long long)predicted);
    EXPECT_NEAR(double(peak) / double(predicted), 1.0, 0.15) << "tile " << tile << ": " << peak << " live at the peak, "
                                                            << predicted << " predicted";
  }
}

}  // namespace
}  // namespace tessera
