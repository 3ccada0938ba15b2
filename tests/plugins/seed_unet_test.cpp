// The seed paper's benchmark U-Net family (plugins/seed_unet), loaded as a plugin: the
// presets have exactly the trainable parameters of the seed's table, the layers follow
// torchgpipe's channel arithmetic, and forward gives logits of the input's size.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>

#include "tessera/core/decomposition.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/model_registry.hpp"
#include "tessera/core/plugin_loader.hpp"

namespace tessera {
namespace {

const ModelRegistry& seed_models() {
  static const ModelRegistry registry = [] {
    ModelRegistry r;
    load_plugin(r, TESSERA_SEED_UNET_PLUGIN);
    return r;
  }();
  return registry;
}

int64_t trainable_parameters(const ModelHandle& h) {
  int64_t n = 0;
  for (const auto& p : h.module->parameters())
    if (p.requires_grad()) n += p.numel();
  return n;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no tessera::Error thrown)";
}

// Seal et al. (ICPP 2020), table of U-Net sizes: Small (L 5, n_c 2), Medium-1 (L 5, n_c 5),
// Medium-2 (L 6, n_c 2), Large (L 7, n_c 2), 64 base filters, 4 input channels, 1 output.
// Each preset is built with its defaults (Large: 4.6 GB of float parameters, about 15 s to
// initialise on two cores) and its registered parameters counted.
TEST(SeedUNet, ParameterCountsEqualTheSeedTable) {
  const std::pair<const char*, int64_t> table[] = {
      {"s0-small", 72'301'856}, {"s0-medium1", 232'687'904}, {"s0-medium2", 289'357'088}, {"s0-large", 1'157'578'016}};
  torch::NoGradGuard no_grad;
  for (const auto& [name, seed_count] : table) {
    const ModelHandle h = seed_models().create(name, ModelOptions{});
    EXPECT_EQ(trainable_parameters(h), seed_count) << name;
    int64_t all = 0;
    for (const auto& p : h.module->parameters()) all += p.numel();
    EXPECT_EQ(all, seed_count) << name << ": no frozen parameters either";
    EXPECT_TRUE(h.module->buffers().empty()) << name << ": instance norm keeps no running statistics";
  }
}

// torchgpipe's unet(depth 2, num_convs 3, base_channels 8, input_channels 4, output_channels 2),
// written out: every convolution bias-free, widths 8·2^ℓ down, the bottleneck widening to 32
// inside, the decoder ending at 8/2 = 4, a 1×1 head; in forward order.
TEST(SeedUNet, ParametersFollowTorchgpipesChannelArithmeticInForwardOrder) {
  const ModelHandle h = seed_models().create(
      "s0-unet", ModelOptions{}.with_levels(3).with_filters(8).with_classes(2).with("convs", "3"));
  using Shape = std::vector<int64_t>;
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"enc0.conv0.weight", {8, 4, 3, 3}},        {"enc0.conv1.weight", {8, 8, 3, 3}},
      {"enc0.conv2.weight", {8, 8, 3, 3}},        {"enc1.conv0.weight", {16, 8, 3, 3}},
      {"enc1.conv1.weight", {16, 16, 3, 3}},      {"enc1.conv2.weight", {16, 16, 3, 3}},
      {"bottleneck.conv0.weight", {32, 16, 3, 3}}, {"bottleneck.conv1.weight", {32, 32, 3, 3}},
      {"bottleneck.conv2.weight", {16, 32, 3, 3}}, {"dec1.conv0.weight", {8, 32, 3, 3}},
      {"dec1.conv1.weight", {8, 8, 3, 3}},        {"dec1.conv2.weight", {8, 8, 3, 3}},
      {"dec0.conv0.weight", {4, 16, 3, 3}},       {"dec0.conv1.weight", {4, 4, 3, 3}},
      {"dec0.conv2.weight", {4, 4, 3, 3}},        {"head.weight", {2, 4, 1, 1}}};
  std::vector<std::pair<std::string, Shape>> actual;
  for (const auto& p : h.module->named_parameters()) actual.emplace_back(p.key(), p.value().sizes().vec());
  EXPECT_EQ(actual, expected);
}

struct ForwardCase {
  std::string model;
  ModelOptions options;
  std::vector<int64_t> input;  // N, C, spatial...
  int64_t classes;
};

std::ostream& operator<<(std::ostream& os, const ForwardCase& c) { return os << c.model; }

class SeedUNetForward : public ::testing::TestWithParam<ForwardCase> {};

// Logits N × classes × (input spatial), finite, in training mode (dropout on) and in eval mode;
// a backward pass reaches every parameter.
TEST_P(SeedUNetForward, GivesLogitsOfTheInputSize) {
  const ForwardCase& c = GetParam();
  torch::manual_seed(7);
  const ModelHandle h = seed_models().create(c.model, c.options);
  const auto x = torch::randn(c.input);
  auto expected = c.input;
  expected[1] = c.classes;
  h.module->train();
  const auto y = h.forward(x);
  EXPECT_EQ(y.sizes(), expected);
  EXPECT_TRUE(torch::isfinite(y).all().item<bool>());
  y.square().mean().backward();
  for (const auto& p : h.module->named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
  h.module->eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(h.forward(x).sizes(), expected);
}

INSTANTIATE_TEST_SUITE_P(
    Plugins, SeedUNetForward,
    ::testing::Values(
        // The seed's Small with the seed's 4 bands and 1 class, narrowed to 4 filters.
        ForwardCase{"s0-small", ModelOptions{}.with_filters(4), {1, 4, 64, 64}, 1},
        ForwardCase{"s0-unet", ModelOptions{}.with_dims(3).with_levels(3).with_filters(4).with_in_channels(1).with_classes(3),
                    {2, 1, 8, 8, 8}, 3},
        // Sides that are not multiples of 2^2: pooling floors, the decoder pads (torchgpipe's PopCat).
        ForwardCase{"s0-unet", ModelOptions{}.with_levels(3).with_filters(4).with("convs", "1"), {1, 4, 13, 10}, 1}),
    [](const auto& info) {
      std::string name = info.param.model + "_" + std::to_string(info.param.input.size() - 2) + "d_" +
                         std::to_string(info.index);
      for (auto& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

// Convolutions without bias and norms without affine parameters: the network cannot tell
// c·x from x (c > 0), up to the norm's ε. A bias anywhere before the last norm would break this.
TEST(SeedUNet, ScalingTheInputLeavesTheLogitsUnchanged) {
  torch::manual_seed(9);
  const ModelHandle h = seed_models().create("s0-unet", ModelOptions{}.with_levels(3).with_filters(4));
  h.module->eval();
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({1, 4, 16, 16});
  const auto y = h.forward(x);
  EXPECT_TRUE(torch::allclose(h.forward(7.0 * x), y, 1e-3, 1e-4)) << (h.forward(7.0 * x) - y).abs().max();
  EXPECT_GT((h.forward(x + 1.0) - y).abs().max().item<double>(), 1e-3);  // not constant: an offset is seen
}

// Channel dropout (p = 0.1) acts in training only: eval is deterministic, training is not.
TEST(SeedUNet, DropoutActsInTrainingOnly) {
  torch::manual_seed(10);
  const ModelHandle h = seed_models().create("s0-unet", ModelOptions{}.with_levels(2).with_filters(16));
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({1, 4, 16, 16});
  h.module->eval();
  EXPECT_TRUE(torch::equal(h.forward(x), h.forward(x)));
  h.module->train();
  EXPECT_FALSE(torch::equal(h.forward(x), h.forward(x)));
}

// The host starts `train` and `infer` from ModelEntry::defaults: they are the seed's values
// and the factory accepts them as given (including norm, which the host always passes).
TEST(SeedUNet, RegisteredDefaultsAreTheSeedsAndBuild) {
  const std::tuple<const char*, int, int> presets[] = {
      {"s0-unet", 6, 2}, {"s0-small", 6, 2}, {"s0-medium1", 6, 5}, {"s0-medium2", 7, 2}, {"s0-large", 8, 2}};
  for (const auto& [name, levels, convs] : presets) {
    const ModelOptions& d = seed_models().model(name).defaults;
    EXPECT_EQ(d.dims, 2) << name;
    EXPECT_EQ(d.in_channels, 4) << name;
    EXPECT_EQ(d.classes, 1) << name;
    EXPECT_EQ(d.filters, 64) << name;
    EXPECT_EQ(d.levels, levels) << name;
    EXPECT_EQ(d.get_int("convs", 0), convs) << name;
    EXPECT_EQ(d.get_string("norm", ""), "instance") << name;
  }
  ModelOptions small = seed_models().model("s0-small").defaults;
  EXPECT_EQ(trainable_parameters(seed_models().create("s0-small", small.with_filters(4))),
            trainable_parameters(seed_models().create("s0-unet", ModelOptions{}.with_filters(4))));
}

class NoOpDecomposition : public Decomposition {
 public:
  torch::Tensor convolve(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                         int64_t width) const override {
    return x;
  }
  torch::Tensor image_sum(const torch::Tensor& x) const override { return x; }
  torch::Tensor batch_sum(const torch::Tensor& x) const override { return x; }
};

TEST(SeedUNet, BadOptionsAndInputsAreNamed) {
  auto create = [](const ModelOptions& o) { return error_of([&] { seed_models().create("s0-unet", o); }); };
  const auto unknown = create(ModelOptions{}.with("reduction", "4"));
  EXPECT_NE(unknown.find("model s0-unet"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("unknown option 'reduction' (known: convs, norm)"), std::string::npos) << unknown;
  const auto norm = create(ModelOptions{}.with("norm", "group"));
  EXPECT_NE(norm.find("norm must be instance"), std::string::npos) << norm;
  EXPECT_NE(create(ModelOptions{}.with_levels(1)).find("levels must be in 2..9"), std::string::npos);
  EXPECT_NE(create(ModelOptions{}.with_dims(1)).find("dims must be 2 or 3, got 1"), std::string::npos);
  EXPECT_NE(create(ModelOptions{}.with_filters(1)).find("filters must be >= 2"), std::string::npos);
  EXPECT_NE(create(ModelOptions{}.with("convs", "0")).find("convs must be >= 1, got 0"), std::string::npos);

  const ModelHandle h = seed_models().create("s0-small", ModelOptions{}.with_filters(2));
  const auto small = error_of([&] { h.forward(torch::zeros({1, 4, 32, 16})); });
  EXPECT_NE(small.find("spatial side 16 is smaller than 2^5 = 32"), std::string::npos) << small;
  const auto bands = error_of([&] { h.forward(torch::zeros({1, 3, 32, 32})); });
  EXPECT_NE(bands.find("3 channels, the model expects 4"), std::string::npos) << bands;
  const NoOpDecomposition split;
  const DecompositionScope scope(split);
  const auto decomposed = error_of([&] { h.forward(torch::zeros({1, 4, 32, 32})); });
  EXPECT_NE(decomposed.find("s0-small: cannot be split across ranks"), std::string::npos) << decomposed;
}

}  // namespace
}  // namespace tessera
