#include "tessera/core/unet.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tessera/core/unet_stages.hpp"

namespace tessera {
namespace {

int64_t count_parameters(UNet& net) {
  int64_t n = 0;
  for (const auto& p : net->parameters()) n += p.numel();
  return n;
}

TEST(UNet, ParameterCountEqualsTheSpecArithmetic) {
  std::vector<UNetOptions> cases = {
      unet_preset("unet-tiny"),
      unet_preset("unet-tiny").with_norm(Norm::kBatch).with_decoder(Decoder::kUpsample),
      unet_preset("unet-tiny").with_norm(Norm::kGroup).with_convs_per_level(3),
      unet_preset("unet3d-tiny").with_base_filters(4).with_norm(Norm::kInstance),
  };
  for (auto& o : cases) {
    UNet net(o);
    EXPECT_EQ(count_parameters(net), unet_parameter_count(o)) << "levels " << o.levels << " dims " << o.dims;
  }
}

TEST(UNet, ValidOutputSizeEqualsTheSpecIn2dAnd3d) {
  torch::manual_seed(0);
  auto o2 = unet_preset("unet-tiny").with_base_filters(4).with_classes(3);
  UNet net2(o2);
  net2->eval();
  torch::NoGradGuard ng;
  const int64_t in2 = 32 + unet_remainder(o2) + 2 * unet_halo(o2);
  auto y2 = net2->forward(torch::randn({2, 4, in2, in2 + 8}));
  EXPECT_EQ(y2.sizes(), (std::vector<int64_t>{2, 3, *unet_output_size(o2, in2), *unet_output_size(o2, in2 + 8)}));

  auto o3 = unet_preset("unet3d-tiny").with_base_filters(4);
  UNet net3(o3);
  net3->eval();
  const int64_t in3 = 8 + unet_remainder(o3) + 2 * unet_halo(o3);
  auto y3 = net3->forward(torch::randn({1, 1, in3, in3, in3}));
  EXPECT_EQ(y3.size(2), *unet_output_size(o3, in3));
  EXPECT_EQ(y3.size(1), 3);
}

TEST(ConvNd, StrideEqualsKernelTransposedPathEqualsTorchTransposedConvolution) {
  torch::manual_seed(2);
  for (int dims : {2, 3})
    for (bool channels_last : {false, true}) {
      const std::string what = std::to_string(dims) + "-D, " + (channels_last ? "channels-last" : "contiguous");
      ConvNd up(dims, 6, 5, 2, 0, 2, /*transposed=*/true);
      std::vector<int64_t> shape{2, 6, 7, 5};
      if (dims == 3) shape.push_back(3);
      const auto format = !channels_last ? at::MemoryFormat::Contiguous
                          : dims == 2    ? at::MemoryFormat::ChannelsLast
                                         : at::MemoryFormat::ChannelsLast3d;
      auto x = torch::randn(shape).contiguous(format).requires_grad_();
      auto params = up->named_parameters();
      auto w = params["weight"], b = params["bias"];
      {
        torch::NoGradGuard ng;
        b.uniform_(-1, 1);  // a zero bias would hide a misplaced bias
      }
      const auto got = up->forward(x);
      // The output keeps the input's memory format, so the next layers need no layout copy.
      EXPECT_TRUE(got.is_contiguous(format)) << what;
      const auto g = torch::randn(got.sizes());
      const auto grads = torch::autograd::grad({got}, {x, w, b}, {g});
      const auto x2 = x.detach().requires_grad_(), w2 = w.detach().requires_grad_(), b2 = b.detach().requires_grad_();
      const auto want = dims == 2 ? torch::conv_transpose2d(x2, w2, b2, 2) : torch::conv_transpose3d(x2, w2, b2, 2);
      const auto want_grads = torch::autograd::grad({want}, {x2, w2, b2}, {g});
      EXPECT_LE((got - want).abs().max().item<float>(), 1e-5) << what;
      for (size_t i = 0; i < grads.size(); ++i)
        EXPECT_LE((grads[i] - want_grads[i]).abs().max().item<float>(), 1e-4) << what << ", gradient " << i;
    }
}

TEST(ConvNd, PointwiseConvolutionEqualsTorchsInEitherMemoryFormat) {
  torch::manual_seed(3);
  for (bool channels_last : {false, true}) {
    ConvNd head(2, 6, 4, 1, 0);
    auto x = torch::randn({2, 6, 9, 7});
    if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    auto params = head->named_parameters();
    {
      torch::NoGradGuard ng;
      params["bias"].uniform_(-1, 1);
    }
    const auto want = torch::conv2d(x.contiguous(), params["weight"], params["bias"]);
    const auto with_gradients = head->forward(x);  // the matrix product
    EXPECT_LE((with_gradients - want).abs().max().item<float>(), 1e-5) << channels_last;
    EXPECT_TRUE(with_gradients.is_contiguous(channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous));
    torch::NoGradGuard ng;  // inference: oneDNN's 1×1 convolution
    EXPECT_LE((head->forward(x) - want).abs().max().item<float>(), 1e-5) << channels_last;
  }
}

TEST(UNet, SamePaddingAndUpsampleDecoderKeepTheInputSize) {
  auto o = unet_preset("unet-tiny").with_base_filters(4).with_padding(Padding::kSame).with_decoder(Decoder::kUpsample);
  UNet net(o);
  torch::NoGradGuard ng;
  auto y = net->forward(torch::randn({1, 4, 48, 64}));
  EXPECT_EQ(y.size(2), 48);
  EXPECT_EQ(y.size(3), 64);
}


// The textbook U-Net forward, written with the blocks themselves (ConvBlock::forward, the
// up-convolution, the head), as the plugins use them. The network's own forward steps through
// its layer sequence instead, so a pipeline stage can stop inside a block.
torch::Tensor block_forward(UNetImpl& net, torch::Tensor x) {
  const UNetOptions& o = net.options();
  auto child = [&](const std::string& name) { return net.named_children()[name]; };
  std::vector<torch::Tensor> skips;
  for (int l = 0; l < o.levels; ++l) {
    x = std::dynamic_pointer_cast<ConvBlockImpl>(child("enc" + std::to_string(l)))->forward(x);
    if (l < o.levels - 1) {
      skips.push_back(x);
      x = max_pool2x(x);
    }
  }
  for (int l = o.levels - 2; l >= 0; --l) {
    x = std::dynamic_pointer_cast<ConvNdImpl>(child("up" + std::to_string(l)))->forward(x);
    if (o.decoder == Decoder::kUpsample) x = upsample_nearest2x(x);
    x = torch::cat({center_crop(skips[static_cast<size_t>(l)], x), x}, 1);
    x = std::dynamic_pointer_cast<ConvBlockImpl>(child("dec" + std::to_string(l)))->forward(x);
  }
  return std::dynamic_pointer_cast<ConvNdImpl>(child("head"))->forward(x);
}

TEST(UNet, ForwardEqualsItsBlocksAppliedOneAfterAnotherBitForBit) {
  const std::vector<UNetOptions> cases = {
      unet_preset("unet-tiny").with_base_filters(4),
      unet_preset("unet-tiny").with_base_filters(4).with_norm(Norm::kBatch).with_decoder(Decoder::kUpsample),
      unet_preset("unet-tiny").with_base_filters(4).with_norm(Norm::kGroup).with_padding(Padding::kSame),
      unet_preset("unet3d-tiny").with_base_filters(2).with_norm(Norm::kInstance),
  };
  for (const auto& o : cases) {
    torch::manual_seed(7);
    UNet net(o);
    net->eval();
    torch::NoGradGuard no_grad;
    const int64_t side = o.padding == Padding::kSame ? 32 : 16 + unet_remainder(o) + 2 * unet_halo(o);
    std::vector<int64_t> shape{2, o.in_channels, side, side + unet_alignment(o)};  // not square
    if (o.dims == 3) shape = {1, o.in_channels, side, side, side};
    const auto x = torch::randn(shape);
    EXPECT_TRUE(torch::equal(net->forward(x), block_forward(*net, x)))
        << o.dims << "-D norm " << to_string(o.norm) << " decoder " << to_string(o.decoder);
  }
}

// A pipeline stage runs the same forward over its range of layers: chained stages, cut
// anywhere (inside blocks, between a skip's producer and its consumer), give the full
// network's logits exactly, in training mode with gradients, as the pipeline runs them.
TEST(UNetStage, ChainedStagesEqualTheFullForwardBitForBit) {
  const UNetOptions o = unet_preset("unet-tiny").with_base_filters(4).with_norm(Norm::kGroup);
  torch::manual_seed(3);
  UNet net(o);
  const int64_t side = 16 + unet_remainder(o) + 2 * unet_halo(o);
  const LayerSequence seq = unet_layer_sequence(o, side);
  const auto x = torch::randn({2, o.in_channels, side, side});
  const auto expected = net->forward(x);
  for (const std::vector<int>& cuts : {std::vector<int>{}, {1}, {5, 17}, {3, 9, 20, 30}}) {
    std::map<int, torch::Tensor> in_flight;
    StageTensors in{x.clone().requires_grad_(), {}};
    int first = 0;
    for (size_t s = 0; s <= cuts.size(); ++s) {
      const int last = s < cuts.size() ? cuts[s] : seq.size() - 1;
      UNetStage stage(*net, seq, first, last);
      for (int e : stage->skips_in()) in.skips[e] = in_flight.at(e);
      StageTensors out = stage->forward(in);
      for (auto& [e, t] : out.skips) in_flight[e] = t;
      in = StageTensors{out.main, {}};
      first = last + 1;
    }
    EXPECT_TRUE(torch::equal(in.main, expected)) << cuts.size() + 1 << " stages";
  }
}

}  // namespace
}  // namespace tessera
