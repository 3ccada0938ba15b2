// The registry's built-ins and its refusals, without any plugin.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "error_of.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/model_registry.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/core/unet_spec.hpp"

namespace tessera {
namespace {

int64_t parameter_count(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

using test::error_of;

TEST(ModelRegistry, BuiltInsAreUNetItsPresetsLossesAndArgmax) {
  const ModelRegistry r;
  const auto names = r.model_names();
  EXPECT_EQ(names.front(), "unet");
  for (const auto& preset : unet_preset_names()) {
    EXPECT_TRUE(r.has_model(preset)) << preset;
    EXPECT_EQ(r.model(preset).origin, "built-in");
  }
  EXPECT_EQ(names.size(), unet_preset_names().size() + 1);
  for (const char* loss : {"ce", "dice", "dice_ce", "focal", "adaptive_dice_focal"})
    EXPECT_TRUE(r.has_loss(loss)) << loss;
  EXPECT_TRUE(r.has_post_processor("argmax"));
}

TEST(ModelRegistry, PresetWithOverridesBuildsTheSameNetworkAsUNetDirectly) {
  const ModelRegistry r;
  const auto options = ModelOptions{}.with_in_channels(2).with_classes(3).with_levels(3).with("norm", "group");
  torch::manual_seed(7);
  const ModelHandle h = r.create("unet-tiny", options);
  torch::manual_seed(7);
  const UNetOptions expected =
      unet_preset("unet-tiny").with_in_channels(2).with_classes(3).with_levels(3).with_norm(Norm::kGroup);
  UNet direct(expected);
  // The parameter count from the architecture arithmetic (no LibTorch) is an independent check.
  EXPECT_EQ(parameter_count(*h.module), unet_parameter_count(expected));
  EXPECT_EQ(unet_options_from("unet-tiny", options), expected);
  const auto x = torch::randn({1, 2, 60, 60});  // a valid input side for L = 3
  const auto y = h.forward(x);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{1, 3, 20, 20}));
  EXPECT_TRUE(torch::equal(y, direct->forward(x)));
  // Parameter names stay those of UNet, so checkpoints keep their meaning.
  EXPECT_TRUE(h.module->named_parameters().contains("enc0.conv0.weight"));
}

TEST(ModelRegistry, PlainUNetStartsFromTheUNetOptionsDefaults) {
  const auto o = unet_options_from("unet", ModelOptions{}.with_dims(3).with("padding", "same").with("convs", "1"));
  UNetOptions expected;
  expected.dims = 3;
  expected.padding = Padding::kSame;
  expected.convs_per_level = 1;
  EXPECT_EQ(o, expected);
}

TEST(ModelRegistry, BadOptionsNameTheModelAndTheField) {
  const ModelRegistry r;
  auto create = [&](const ModelOptions& o) { return error_of([&] { r.create("unet", o); }); };
  EXPECT_NE(create(ModelOptions{}.with("convs", "two")).find("convs must be an integer, got 'two'"), std::string::npos);
  EXPECT_NE(create(ModelOptions{}.with("colour", "red")).find("unknown option 'colour'"), std::string::npos);
  EXPECT_NE(create(ModelOptions{}.with_levels(0)).find("levels must be positive"), std::string::npos);
  EXPECT_NE(create(ModelOptions{}.with_dims(4)).find("dims"), std::string::npos);
  EXPECT_NE(create(ModelOptions{}.with("padding", "full")).find("padding: 'full'"), std::string::npos);
}

TEST(ModelRegistry, UnknownNameListsTheKnownOnes) {
  const ModelRegistry r;
  const auto msg = error_of([&] { r.create("unet-huge", {}); });
  EXPECT_NE(msg.find("unknown name 'unet-huge'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unet-small"), std::string::npos) << msg;
}

TEST(ModelRegistry, SecondRegistrationOfANameIsRefusedNamingBothOrigins) {
  ModelRegistry r;
  auto factory = [](const ModelOptions&) { return ModelHandle{}; };
  const auto msg = error_of([&] { r.add_model({"unet", "impostor", factory, "/tmp/impostor.so"}); });
  EXPECT_EQ(msg, "/tmp/impostor.so: model 'unet' is already registered (built-in)");
  EXPECT_EQ(r.model("unet").origin, "built-in");
  EXPECT_NE(error_of([&] { r.add_loss({"dice_ce", "", [](auto& a, auto&) { return a; }, "x.so"}); })
                .find("loss 'dice_ce' is already registered"),
            std::string::npos);
  EXPECT_NE(error_of([&] { r.add_model({"", "", factory, "y.so"}); }).find("without a name"), std::string::npos);
  EXPECT_NE(error_of([&] { r.add_model({"empty", "", nullptr, "z.so"}); }).find("has no function"), std::string::npos);
}

TEST(ModelRegistry, FactoryReturningNothingIsAnError) {
  ModelRegistry r;
  r.add_model({"hollow", "", [](const ModelOptions&) { return ModelHandle{}; }, "hollow.so"});
  EXPECT_NE(error_of([&] { r.create("hollow", {}); }).find("returned no module"), std::string::npos);
}

TEST(ModelRegistry, BuiltInLossesAndArgmaxAgreeWithHandValues) {
  const ModelRegistry r;
  // Uniform logits over 2 classes: cross-entropy ln 2 per pixel, whatever the target.
  const auto logits = torch::zeros({1, 2, 3, 3});
  const auto target = torch::tensor({0, 1, 1, 0, 0, 1, 1, 1, 0}, torch::kLong).view({1, 3, 3});
  EXPECT_NEAR(r.loss("ce").loss(logits, target).item<double>(), std::log(2.0), 1e-6);
  // Soft Dice with p = 1/2 everywhere, smooth 1: class 1 covers 5 pixels,
  // dice_1 = (2·2.5 + 1) / (4.5 + 5 + 1), dice_0 = (2·2 + 1) / (4.5 + 4 + 1).
  const double d1 = 6.0 / 10.5, d0 = 5.0 / 9.5;
  EXPECT_NEAR(r.loss("dice").loss(logits, target).item<double>(), 1.0 - (d0 + d1) / 2, 1e-5);
  auto l = torch::zeros({1, 3, 1, 2});
  l[0][2][0][0] = 1.0;
  l[0][1][0][1] = 2.0;
  const auto labels = r.post_processor("argmax").process(l);
  EXPECT_EQ(labels.sizes(), (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(labels[0][0][0].item<int64_t>(), 2);
  EXPECT_EQ(labels[0][0][1].item<int64_t>(), 1);
}

}  // namespace
}  // namespace tessera
