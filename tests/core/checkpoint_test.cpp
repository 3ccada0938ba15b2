#include "tessera/core/checkpoint.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/run/run_writer.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("tessera-ckpt-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// core makes the bytes, the run library writes them (staged, durable).
void save(const std::string& path, UNet& net, const CheckpointMeta& meta) {
  write_checkpoint_file(path, checkpoint_bytes(net, meta));
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
  save(path, net, meta_for(o));
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
  save(path, net, meta_for(o));
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
  save(path, net, meta_for(o));
  const auto before = fs::file_size(path);
  // A folder squatting on the temporary's name makes the write fail half-way.
  fs::create_directories(path + ".partial-" + std::to_string(::getpid()) + "/x");
  EXPECT_THROW(save(path, net, meta_for(o)), Error);
  EXPECT_EQ(fs::file_size(path), before);
  EXPECT_NO_THROW(load_checkpoint(path));
}

TEST(Checkpoint, DescriptionJsonRoundTrips) {
  CheckpointMeta m = meta_for(unet_preset("unet-tiny").with_base_filters(4));
  m.epoch = 3;
  m.trainer_state = R"({"rng":"1 2 3"})";
  const nlohmann::json j = m;
  EXPECT_FALSE(j.contains("format"));  // the file's envelope is the checkpoint's business
  const auto back = j.get<CheckpointMeta>();
  EXPECT_EQ(back.model, m.model);
  EXPECT_EQ(back.norm.offset, m.norm.offset);
  EXPECT_EQ(back.norm.scale, m.norm.scale);
  EXPECT_EQ(back.class_names, m.class_names);
  EXPECT_EQ(back.step, 42);
  EXPECT_EQ(back.epoch, 3);
  EXPECT_EQ(back.trainer_state, m.trainer_state);
  m.trainer_state.clear();
  EXPECT_FALSE(nlohmann::json(m).contains("trainer_state"));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Every way of loading refuses the file with an error naming it.
void expect_refused(const std::string& path, const std::string& what) {
  for (int how = 0; how < 3; ++how) {
    try {
      if (how == 0) load_checkpoint(path);
      if (how == 1) read_checkpoint_meta(path);
      if (how == 2) verify_checkpoint(path);
      ADD_FAILURE() << what << ": loaded (reader " << how << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << what << ": " << e.what();
    }
  }
}

TEST(Checkpoint, AnyFlippedByteIsRefused) {
  const auto dir = temp_dir("flip");
  const auto o = unet_preset("unet-tiny").with_base_filters(4);
  UNet net(o);
  const std::string good = (dir / "good.pt").string(), bad = (dir / "bad.pt").string();
  save(good, net, meta_for(o));
  const std::string bytes = read_bytes(good);
  ASSERT_GT(bytes.size(), 1000u);
  // Spread over the archive (headers, JSON description, tensor data) and the trailer.
  for (size_t k = 0; k <= 40; ++k) {
    const size_t at = k == 40 ? bytes.size() - 1 : k * (bytes.size() - 1) / 40;
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    write_bytes(bad, damaged);
    expect_refused(bad, "byte " + std::to_string(at) + " of " + std::to_string(bytes.size()) + " flipped");
  }
  std::string damaged = bytes;
  damaged[bytes.size() / 2] ^= 1;
  write_bytes(bad, damaged);
  try {
    load_checkpoint(bad);
    ADD_FAILURE() << "a checkpoint with a flipped bit loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("damaged"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(load_checkpoint(good));
}

TEST(Checkpoint, CutShortOrGrownIsRefused) {
  const auto dir = temp_dir("cut");
  const auto o = unet_preset("unet-tiny").with_base_filters(4);
  UNet net(o);
  const std::string good = (dir / "good.pt").string(), bad = (dir / "bad.pt").string();
  save(good, net, meta_for(o));
  const std::string bytes = read_bytes(good);
  // Down to the bare archive without its checksum record (24 bytes), and a few bytes less.
  for (size_t cut : {size_t(1), size_t(8), size_t(23), size_t(24), size_t(25), size_t(100), bytes.size() / 2,
                     bytes.size() - 1, bytes.size()}) {
    write_bytes(bad, bytes.substr(0, bytes.size() - cut));
    expect_refused(bad, "cut by " + std::to_string(cut) + " bytes");
  }
  write_bytes(bad, bytes + std::string(100, '\0'));
  expect_refused(bad, "100 bytes appended");
}

// A checkpoint written before checksums (format version 1: the bare archive) still loads.
TEST(Checkpoint, OldCheckpointWithoutChecksumLoadsWithAWarning) {
  const auto dir = temp_dir("v1");
  const auto o = unet_preset("unet-tiny").with_base_filters(4);
  torch::manual_seed(3);
  UNet net(o);
  const std::string path = (dir / "old.pt").string();
  {
    const CheckpointMeta m = meta_for(o);
    nlohmann::json j{{"format", "tessera-checkpoint"}, {"version", 1}, {"model", m.model},
                     {"normalization", {{"offset", m.norm.offset}, {"scale", m.norm.scale}}},
                     {"class_names", m.class_names}, {"step", m.step}, {"epoch", 0}};
    torch::serialize::OutputArchive archive, model;
    archive.write("tessera_meta", c10::IValue(j.dump()));
    net->save(model);
    archive.write("model", model);
    archive.save_to(path);
  }
  ::testing::internal::CaptureStderr();
  LoadedCheckpoint loaded = load_checkpoint(path);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_EQ(loaded.meta.step, 42);
  torch::NoGradGuard ng;
  net->eval();
  loaded.net->eval();
  auto x = torch::randn({1, 4, 92, 92});
  EXPECT_TRUE(torch::equal(net->forward(x), loaded.net->forward(x)));
}

}  // namespace
}  // namespace tessera
