// The shipped plugins, loaded as plugins: the SE-U-Net and the four decomposition test
// networks build, give logits of the right shape, train, and do what their designs promise.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "tessera/core/error.hpp"
#include "tessera/core/model_registry.hpp"
#include "tessera/core/plugin_loader.hpp"

namespace tessera {
namespace {

const ModelRegistry& shipped() {
  static const ModelRegistry registry = [] {
    ModelRegistry r;
    load_plugin(r, TESSERA_SE_UNET_PLUGIN);
    load_plugin(r, TESSERA_TEST_NETWORKS_PLUGIN);
    return r;
  }();
  return registry;
}

torch::Tensor& parameter(const ModelHandle& h, const std::string& name) {
  auto* p = h.module->named_parameters().find(name);
  TESSERA_CHECK(p != nullptr);
  return *p;
}

struct Case {
  std::string model;
  ModelOptions options;
  std::vector<int64_t> input;  // N, C, spatial...
  int64_t classes;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.model; }

class ShippedModel : public ::testing::TestWithParam<Case> {};

// Forward gives N × classes × (input spatial); a few Adam steps on a fixed toy target (the
// sign of the first input channel, a per-pixel rule every one of them can learn) lower the
// cross-entropy, and every parameter gets a gradient.
TEST_P(ShippedModel, BuildsGivesLogitsOfTheInputSizeAndTrains) {
  const Case& c = GetParam();
  torch::manual_seed(3);
  const ModelHandle h = shipped().create(c.model, c.options);
  const auto x = torch::randn(c.input);
  const auto target = (x.select(1, 0) > 0).to(torch::kLong);
  auto expected = c.input;
  expected[1] = c.classes;
  EXPECT_EQ(h.forward(x).sizes(), expected);

  h.module->train();
  torch::optim::Adam opt(h.module->parameters(), torch::optim::AdamOptions(1e-2));
  double first = 0, last = 0;
  for (int step = 0; step < 15; ++step) {
    opt.zero_grad();
    const auto loss = torch::nn::functional::cross_entropy(h.forward(x), target);
    loss.backward();
    if (step == 0) {
      for (const auto& p : h.module->named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
    }
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_LT(last, 0.7 * first) << c.model << ": loss " << first << " -> " << last;
}

INSTANTIATE_TEST_SUITE_P(
    Plugins, ShippedModel,
    ::testing::Values(
        Case{"se-unet", ModelOptions{}.with_in_channels(2).with_classes(3).with_filters(4).with_levels(2),
             {2, 2, 8, 8, 8}, 3},
        Case{"se-unet", ModelOptions{}.with_dims(2).with_filters(4).with_levels(3).with("norm", "group"),
             {2, 1, 16, 16}, 2},
        Case{"test-cnn1d", ModelOptions{}.with_in_channels(2).with_classes(3), {2, 2, 32}, 3},
        Case{"test-cnn2d", ModelOptions{}, {2, 1, 12, 10}, 2},
        Case{"test-cnn3d", ModelOptions{}.with("norm", "instance"), {2, 1, 6, 6, 6}, 2},
        Case{"test-fcn2d", ModelOptions{}.with_classes(4), {2, 1, 16, 16}, 4}),
    [](const auto& info) {
      std::string name = info.param.model + "_" + std::to_string(info.param.input.size() - 2) + "d";
      for (auto& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

// DefaultsAreValid for the plugin API's ModelOptions and for each shipped plugin's own options
// struct (SeUNetOptions, TestNetOptions live inside their plugins): every model builds from an
// empty ModelOptions, i.e. from its own defaults, and a bad value is refused naming its field.
TEST(ModelOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(ModelOptions{}.validate());
  const auto msg = [](const ModelOptions& o) {
    try {
      o.validate();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg(ModelOptions{}.with_classes(0)).find("classes must be positive"), std::string::npos);
  EXPECT_NE(msg(ModelOptions{}.with_filters(-1)).find("filters must be positive"), std::string::npos);
}

TEST(ShippedPluginOptions, DefaultsAreValid) {
  for (const char* model : {"se-unet", "test-cnn1d", "test-cnn2d", "test-cnn3d", "test-fcn2d"}) {
    EXPECT_NO_THROW(shipped().create(model, ModelOptions{})) << model;
    bool refused = false;
    try {
      shipped().create(model, ModelOptions{}.with("norm", "sparkly"));
    } catch (const std::exception& e) {
      refused = std::string(e.what()).find("norm") != std::string::npos;
    }
    EXPECT_TRUE(refused) << model << ": a bad norm must be refused naming the key";
  }
}

// One level, one convolution: logits = head(SE(h)) with h the block's features. With the
// second SE layer's weights zero the excitation is sigmoid(b) for its bias b, whatever the
// input, so the network must equal one without SE (bias +40: sigmoid = 1 in float) whose
// linear 1×1 head has column c scaled by sigmoid(b_c).
TEST(SeUNet, SqueezeExcitationScalesEachChannelBySigmoidOfItsGate) {
  torch::manual_seed(5);
  const ModelHandle h = shipped().create(
      "se-unet", ModelOptions{}.with_filters(4).with_levels(1).with("convs", "1").with("reduction", "2").with("norm", "none"));
  const auto x = torch::randn({1, 1, 6, 6, 6});
  torch::NoGradGuard no_grad;
  const auto b = torch::tensor({-2.0f, -0.5f, 0.5f, 2.0f});
  parameter(h, "enc0.se.fc2.weight").zero_();
  parameter(h, "enc0.se.fc2.bias").copy_(b);
  const auto gated = h.forward(x);

  parameter(h, "enc0.se.fc2.bias").fill_(40.0f);
  const auto ungated = h.forward(x);
  parameter(h, "head.weight").mul_(torch::sigmoid(b).view({1, 4, 1, 1, 1}));
  const auto reference = h.forward(x);

  EXPECT_TRUE(torch::allclose(gated, reference, 1e-5, 1e-6)) << (gated - reference).abs().max();
  EXPECT_GT((gated - ungated).abs().max().item<double>(), 1e-2);  // the gates matter
}

// The squeeze sees the whole volume: with one 3³ convolution a voxel's logits depend on its
// 3³ neighbourhood only — except through the SE gate, fed by a global mean. Changing a corner
// voxel moves the logits at the opposite corner; with the SE's first layer zeroed (a constant
// gate) it does not, by exactly 0.
TEST(SeUNet, ExcitationCarriesGlobalContext) {
  torch::manual_seed(11);
  const ModelHandle h = shipped().create(
      "se-unet", ModelOptions{}.with_filters(8).with_levels(1).with("convs", "1").with("reduction", "2").with("norm", "none"));
  torch::NoGradGuard no_grad;
  parameter(h, "enc0.se.fc1.bias").fill_(1.0f);  // keep the hidden ReLUs alive
  const auto x = torch::randn({1, 1, 8, 8, 8});
  auto moved = x.clone();
  moved[0][0][0][0][0] += 100.0f;
  auto far_change = [&] {
    return (h.forward(moved) - h.forward(x)).select(2, 7).select(2, 7).select(2, 7).abs().max().item<double>();
  };
  EXPECT_GT(far_change(), 1e-5);
  parameter(h, "enc0.se.fc1.weight").zero_();
  EXPECT_EQ(far_change(), 0.0);
  const auto near = (h.forward(moved) - h.forward(x)).select(2, 1).select(2, 1).select(2, 1).abs().max();
  EXPECT_GT(near.item<double>(), 0.0);  // the local path is still there
}

TEST(SeUNet, ParameterNamesShowASqueezeExcitationBlockAfterEveryConvolutionBlock) {
  const ModelHandle h = shipped().create("se-unet", ModelOptions{}.with_levels(3).with_filters(4));
  const auto params = h.module->named_parameters();
  for (const char* block : {"enc0", "enc1", "enc2", "dec0", "dec1"})
    for (const char* p : {".se.fc1.weight", ".se.fc2.weight"})
      EXPECT_TRUE(params.contains(std::string(block) + p)) << block << p;
  // Bottleneck r = 4: enc2 has 4·2² = 16 channels → 4 hidden units.
  EXPECT_EQ(params["enc2.se.fc1.weight"].sizes(), (std::vector<int64_t>{4, 16}));
}

// Receptive field of `levels` 3^D same convolutions: radius `levels`. A change at one pixel
// moves exactly the outputs within that radius — the locality that makes these networks
// usable for checking spatial decomposition.
TEST(TestNetworks, CnnOutputsMoveOnlyWithinTheReceptiveField) {
  torch::manual_seed(2);
  const ModelHandle h = shipped().create("test-cnn1d", ModelOptions{}.with_levels(3));
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({1, 1, 32});
  auto moved = x.clone();
  moved[0][0][16] += 5.0f;
  const auto delta = (h.forward(moved) - h.forward(x)).abs().amax(1)[0];
  for (int64_t i = 0; i < 32; ++i) {
    if (i < 13 || i > 19) {
      EXPECT_EQ(delta[i].item<float>(), 0.0f) << i;
    }
  }
  EXPECT_GT(delta.slice(0, 13, 20).max().item<float>(), 0.0f);
}

// Two tiles with a halo of 3 (the receptive-field radius) each side, cropped and joined,
// give the whole image's logits: the decomposition these networks exist to validate.
TEST(TestNetworks, Cnn2dTilesWithHaloEqualTheWholeImage) {
  torch::manual_seed(4);
  const ModelHandle h = shipped().create("test-cnn2d", ModelOptions{}.with_levels(3).with_classes(3));
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({1, 1, 20, 24});
  const auto whole = h.forward(x);
  const auto left = h.forward(x.slice(3, 0, 12 + 3)).slice(3, 0, 12);
  const auto right = h.forward(x.slice(3, 12 - 3, 24)).slice(3, 3, 15);
  EXPECT_TRUE(torch::allclose(torch::cat({left, right}, 3), whole, 1e-5, 1e-6));
}

TEST(TestNetworks, WrongDimsAndBadInputsAreNamed) {
  auto error_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no tessera::Error thrown)";
  };
  const auto dims = error_of([] { shipped().create("test-cnn2d", ModelOptions{}.with_dims(3)); });
  EXPECT_NE(dims.find("model test-cnn2d"), std::string::npos) << dims;
  EXPECT_NE(dims.find("dims must be 2"), std::string::npos) << dims;
  const auto unknown = error_of([] { shipped().create("test-fcn2d", ModelOptions{}.with("convs", "2")); });
  EXPECT_NE(unknown.find("unknown option 'convs'"), std::string::npos) << unknown;
  const ModelHandle fcn = shipped().create("test-fcn2d", ModelOptions{}.with_levels(3));
  const auto side = error_of([&] { fcn.forward(torch::zeros({1, 1, 16, 18})); });
  EXPECT_NE(side.find("spatial side 18 is not a multiple of 4"), std::string::npos) << side;
  const auto channels = error_of([&] { fcn.forward(torch::zeros({1, 3, 16, 16})); });
  EXPECT_NE(channels.find("3 channels, the model expects 1"), std::string::npos) << channels;
}

}  // namespace
}  // namespace tessera
