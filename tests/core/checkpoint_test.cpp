#include "tessera/core/checkpoint.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("tessera-ckpt-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

CheckpointMeta meta_for(const UNetOptions& o) {
  CheckpointMeta m;
  m.model = o;
  m.norm = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  m.class_names = {"a", "b", "c", "d"};
  m.step = 42;
  return m;
}

TEST(Checkpoint, RoundTripRebuildsTheSameNetwork) {
  const auto dir = temp_dir("rt");
  const auto o = unet_preset("unet-tiny").with_base_filters(4).with_norm(Norm::kBatch);
  torch::manual_seed(1);
  UNet net(o);
  const std::string path = (dir / "ck.pt").string();
  save_checkpoint(path, net, meta_for(o));
  auto loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.meta.model, o);
  EXPECT_EQ(loaded.meta.step, 42);
  EXPECT_EQ(loaded.meta.norm.scale, (std::vector<float>{5, 6, 7, 8}));
  net->eval();
  loaded.net->eval();
  torch::NoGradGuard ng;
  auto x = torch::randn({1, 4, 92, 92});
  EXPECT_TRUE(torch::equal(net->forward(x), loaded.net->forward(x)));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename(), "ck.pt") << "temporary left behind";
}

TEST(Checkpoint, TruncatedFileIsAClearErrorNamingIt) {
  const auto dir = temp_dir("trunc");
  const auto o = unet_preset("unet-tiny").with_base_filters(4);
  UNet net(o);
  const std::string path = (dir / "ck.pt").string();
  save_checkpoint(path, net, meta_for(o));
  fs::resize_file(path, fs::file_size(path) / 2);
  try {
    load_checkpoint(path);
    FAIL() << "a truncated checkpoint loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_checkpoint((dir / "missing.pt").string()), Error);
}

TEST(Checkpoint, AFailedSaveKeepsTheOldCheckpoint) {
  const auto dir = temp_dir("keep");
  const auto o = unet_preset("unet-tiny").with_base_filters(4);
  UNet net(o);
  const std::string path = (dir / "ck.pt").string();
  save_checkpoint(path, net, meta_for(o));
  const auto before = fs::file_size(path);
  // A folder squatting on the temporary's name makes the write fail half-way.
  fs::create_directories(path + ".partial-" + std::to_string(::getpid()) + "/x");
  EXPECT_THROW(save_checkpoint(path, net, meta_for(o)), Error);
  EXPECT_EQ(fs::file_size(path), before);
  EXPECT_NO_THROW(load_checkpoint(path));
}

}  // namespace
}  // namespace tessera
