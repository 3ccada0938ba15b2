#include "tessera/core/unet.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

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
  for (int dims : {2, 3}) {
    ConvNd up(dims, 6, 5, 2, 0, 2, /*transposed=*/true);
    std::vector<int64_t> shape{2, 6, 7, 5};
    if (dims == 3) shape.push_back(3);
    auto x = torch::randn(shape, torch::requires_grad());
    auto params = up->named_parameters();
    const auto& w = params["weight"];
    auto b = params["bias"];
    torch::NoGradGuard ng;
    b.uniform_(-1, 1);  // a zero bias would hide a misplaced bias
    auto want = dims == 2 ? torch::conv_transpose2d(x, w, b, 2) : torch::conv_transpose3d(x, w, b, 2);
    EXPECT_LE((up->forward(x) - want).abs().max().item<float>(), 1e-5) << dims << "-D";
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

}  // namespace
}  // namespace tessera
