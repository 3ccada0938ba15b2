// A plugin model (the SE-U-Net) and the built-in U-Net through the same network handle
// (UNet with options.name): the trainer, the checkpoint and tiled inference are the same
// functions for both; what needs the built-in's layer sequence refuses a plugin by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "../core/memory_image.hpp"
#include "tessera/core/checkpoint.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/core/model_registry.hpp"
#include "tessera/core/trainer.hpp"
#include "tessera/core/unet.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::MemoryImage;
using testing::MemorySink;

// The registry the handle builds from finds the shipped plugins (set before its first use).
const ModelRegistry& registry() {
  setenv("TESSERA_PLUGIN_PATH", TESSERA_SHIPPED_PLUGIN_DIR, 1);
  return model_registry();
}

// A small volume: a bright ball (class 1) in a darker box.
struct Phantom {
  MemoryImage image{Index{16, 16, 16}, 1, [](int, const Index& at) {
                      const double r = std::hypot(at[0] - 7.5, at[1] - 8.0, at[2] - 8.5);
                      return float(r < 5 ? 1.0 : 0.1 * std::sin(at[2] / 3.0));
                    }};
  MemoryImage labels{Index{16, 16, 16}, 1, [](int, const Index& at) {
                       return float(std::hypot(at[0] - 7.5, at[1] - 8.0, at[2] - 8.5) < 5 ? 1 : 0);
                     }};
};

UNetOptions se_unet() {
  return model_preset("se-unet").with_in_channels(1).with_classes(2).with_base_filters(4).with_levels(2);
}

UNetOptions builtin() {
  return unet_preset("unet3d-tiny").with_padding(Padding::kSame).with_classes(2).with_base_filters(4).with_levels(2);
}

std::vector<torch::Tensor> snapshot(UNet& net) {
  std::vector<torch::Tensor> out;
  for (const auto& p : net->parameters()) out.push_back(p.detach().clone());
  return out;
}

class RegistryModel : public ::testing::TestWithParam<bool> {};

TEST_P(RegistryModel, TrainsCheckpointsAndInfersThroughTheOneHandle) {
  ASSERT_TRUE(registry().has_model("se-unet"));
  const bool plugin = GetParam();
  const UNetOptions o = plugin ? se_unet() : builtin();
  torch::manual_seed(3);
  UNet net(o);
  EXPECT_TRUE(net->layer_sequence_available());  // the SE-U-Net presents its own (plugin.hpp, LayerLayout)
  // The plugin's own module sits under "model."; the built-in's layers at the top.
  const auto names = net->named_parameters().keys();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front().rfind("model.", 0) == 0, plugin) << names.front();

  Phantom ph;
  TrainOptions t;
  t.tile = 8;
  t.batch = 2;
  t.steps = 3;
  t.steps_per_epoch = 1;
  t.curriculum = {{0, 8}, {2, 16}};  // S4's rising tile sides, the last the whole volume
  t.loss.kind = LossKind::kAdaptiveDiceFocal;
  t.progress = false;
  t.run_dir = (fs::temp_directory_path() / ("tessera-registry-model-" + std::to_string(plugin))).string();
  CheckpointMeta meta;
  meta.model = o;
  meta.norm = {{0.f}, {1.f}};
  meta.norm.kind = "ct";
  meta.norm.clip_low = {-1.f};
  meta.norm.clip_high = {2.f};
  meta.resampling.spacing = {1.0, 1.0, 1.5};
  meta.class_names = {"background", "ball"};
  const std::vector<torch::Tensor> before = snapshot(net);
  const TrainReport r = train(net, {{&ph.image, &ph.labels, Box{{0, 0, 0}, {16, 16, 16}}}}, t, meta);
  EXPECT_EQ(r.steps, 3);
  EXPECT_TRUE(std::isfinite(r.final_loss));
  // The optimiser moved the model's own parameters, whichever built them.
  const std::vector<torch::Tensor> after = snapshot(net);
  double moved = 0;
  for (size_t i = 0; i < before.size(); ++i) moved += (after[i] - before[i]).abs().sum().item<double>();
  EXPECT_GT(moved, 0);

  // The checkpoint rebuilds the same model (name included) with the same preprocessing.
  const fs::path file = fs::path(t.run_dir) / "model.pt";
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << checkpoint_bytes(net, meta);
  const LoadedCheckpoint loaded = load_checkpoint(file.string());
  EXPECT_EQ(loaded.net->options(), o);
  EXPECT_EQ(loaded.meta.norm, meta.norm);
  EXPECT_EQ(loaded.meta.resampling, meta.resampling);
  const torch::Tensor x = torch::rand({1, 1, 16, 16, 16});
  UNet reloaded = loaded.net;
  net->eval();
  reloaded->eval();
  EXPECT_TRUE(torch::equal(net->forward(x), reloaded->forward(x)));

  // Tiled inference writes every voxel once with a class of the model.
  MemorySink sink(Index{16, 16, 16});
  infer_labels(net, ph.image, meta.norm, sink, InferenceOptions().with_tile(8).with_progress(false));
  for (size_t i = 0; i < sink.labels.size(); ++i) {
    ASSERT_EQ(sink.writes[i], 1) << i;
    ASSERT_LT(sink.labels[i], 2) << i;
  }
  fs::remove_all(t.run_dir);
}

INSTANTIATE_TEST_SUITE_P(PluginAndBuiltin, RegistryModel, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "SeUNetPlugin" : "BuiltinUNet"; });

TEST(RegistryModelOptions, PresetsComeFromThePluginsDefaultsAndBadNamesAreRefused) {
  registry();
  const UNetOptions o = model_preset("se-unet");
  EXPECT_EQ(o.name, "se-unet");
  EXPECT_EQ(o.padding, Padding::kSame);
  EXPECT_EQ(o.dims, 3);       // the SE-U-Net's own defaults (plugin ModelEntry::defaults)
  EXPECT_EQ(o.norm, Norm::kInstance);
  const auto known = model_preset_names();
  EXPECT_NE(std::find(known.begin(), known.end(), "se-unet"), known.end());
  try {
    model_preset("se-unet2");
    FAIL() << "an unknown model name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model 'se-unet2'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("se-unet"), std::string::npos) << e.what();
  }
  // A registry model keeps same padding: valid would break its factory's geometry.
  EXPECT_THROW(UNet(UNetOptions(o).with_padding(Padding::kValid)), Error);
  // A preset name is not a model name.
  EXPECT_THROW(UNetOptions(o).with_name("unet-small").validate(), Error);
}

TEST(RegistryModelOptions, CheckpointsWithoutAModelNameAreTheBuiltinUNet) {
  // Checkpoints written before model names existed hold no "name": they load as "unet".
  UNetOptions o = unet_preset("unet-tiny");
  nlohmann::json j = o;
  j.erase("name");
  EXPECT_EQ(j.get<UNetOptions>(), o);
}

}  // namespace
}  // namespace tessera
