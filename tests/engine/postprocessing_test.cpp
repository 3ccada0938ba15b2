// nnU-Net's post-processing decided on validation predictions (engine/postprocessing.hpp):
// a class whose predictions carry a spurious island keeps its largest component; a class
// made of two organs (two kidneys) does not; the decision round-trips through
// RUN/postprocessing.json and is found from a checkpoint of the run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/engine/postprocessing.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::engine {
namespace {
namespace fs = std::filesystem;

const Index kExtent{6, 12, 20};  // (z, y, x)

struct Labels {
  std::vector<uint8_t> v = std::vector<uint8_t>(6 * 12 * 20, 0);
  void box(uint8_t c, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
    for (int64_t z = 1; z < 5; ++z)
      for (int64_t y = y0; y < y1; ++y)
        for (int64_t x = x0; x < x1; ++x) v[size_t((z * 12 + y) * 20 + x)] = c;
  }
};

void write(const std::string& path, const Labels& l) {
  Georeference geo;
  geo.spacing = {1, 1, 1};
  geo.origin = {0, 0, 0};
  geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  io::LabelVolumeWriter w(path, kExtent, geo);
  Block<uint8_t> b(Index{1, kExtent[0], kExtent[1], kExtent[2]});
  b.data = l.v;
  w.write(Box{Index{0, 0, 0}, kExtent}, b);
  w.commit();
}

class Postprocessing : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera-postprocessing-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "pred");
    fs::create_directories(dir_ / "truth");
    fs::create_directories(dir_ / "run" / "checkpoints");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& p) const { return (dir_ / p).string(); }
  fs::path dir_;
};

// Two validation cases. Class 1 (liver): the truth one block, the prediction that block and
// a spurious island. Class 2 (kidneys): two blocks in truth and prediction, the prediction's
// second one a little off, so keeping only the larger one loses a whole organ.
TEST_F(Postprocessing, KeepsTheLargestComponentOnlyWhereItRaisesValidationDice) {
  for (const std::string c : {"case_a.nii.gz", "case_b.nii.gz"}) {
    Labels truth, pred;
    truth.box(1, 0, 6, 0, 10), pred.box(1, 0, 6, 0, 10), pred.box(1, 10, 12, 16, 20);
    truth.box(2, 8, 12, 0, 4), truth.box(2, 8, 12, 8, 12);
    pred.box(2, 8, 12, 0, 4), pred.box(2, 9, 12, 8, 12);
    write(path("pred/" + c), pred);
    write(path("truth/" + c), truth);
  }
  run_postprocess(PostprocessOptions{path("run"), path("pred"), path("truth")});
  const auto d = read_postprocessing(run_of_checkpoint(path("run/checkpoints/last.pt")));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->cases, (std::vector<std::string>{"case_a.nii.gz", "case_b.nii.gz"}));
  ASSERT_EQ(d->classes.size(), 2u);
  EXPECT_EQ(d->classes[0].label, 1);
  EXPECT_EQ(d->classes[0].cases, 2);
  EXPECT_NEAR(d->classes[0].dice_without, 2.0 * 240 / (240 + 272), 1e-12);  // the island: 2 × 4 × 4 voxels
  EXPECT_NEAR(d->classes[0].dice_with, 1.0, 1e-12);
  EXPECT_TRUE(d->classes[0].keep_largest);
  EXPECT_NEAR(d->classes[1].dice_without, 2.0 * 112 / (128 + 112), 1e-12);
  EXPECT_NEAR(d->classes[1].dice_with, 2.0 * 64 / (128 + 64), 1e-12);
  EXPECT_FALSE(d->classes[1].keep_largest);
  EXPECT_EQ(d->keep_largest(), (std::vector<int>{1}));
}

TEST_F(Postprocessing, RefusesWhatItCannotDecideOn) {
  write(path("pred/case_a.nii.gz"), Labels{});
  try {
    run_postprocess(PostprocessOptions{path("run"), path("pred"), path("truth")});
    FAIL() << "no truth";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--truth"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(postprocessing_path(path("run"))));
  EXPECT_FALSE(read_postprocessing(path("run")).has_value());
  EXPECT_EQ(run_of_checkpoint("model.pt"), "");
}

}  // namespace
}  // namespace tessera::engine
