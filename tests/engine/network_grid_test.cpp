// A case stored in another orientation and at another spacing than the network's
// (engine/preprocessing.hpp's to_network_grid, io's ResamplingProbabilitySink): read onto the
// network's grid in LPS order (identity direction, axis flips undone), and labels written on
// that grid come back onto the case's own file geometry unchanged — label in = label out,
// through the real NIfTI writer and reader; --auto's fingerprint of such a case leaves out
// the holdout training leaves out of that LPS-ordered array.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tessera/engine/auto_train.hpp"
#include "tessera/engine/dataset_plan.hpp"
#include "tessera/engine/preprocessing.hpp"
#include "tessera/engine/regions.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/resample.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::engine {
namespace {
namespace fs = std::filesystem;

// Flipped x and z (direction diag(−1, 1, −1)), 0.8 × 0.9 × 3 mm, unequal sizes, off-origin.
io::VolumeGrid flipped_case() {
  io::VolumeGrid g;
  g.extent = {12, 20, 16};  // (z, y, x)
  g.geo.spacing = {0.8, 0.9, 3.0};
  g.geo.origin = {10.0, -5.0, 40.0};
  g.geo.direction = {-1, 0, 0, 0, 1, 0, 0, 0, -1};
  return g;
}

// The case's anatomy in LPS mm, asymmetric along every axis so a flip left in place shows.
uint8_t label_at(double x, double y, double z) {
  if (x > 4.0 && z > 25.0 && y < 3.0) return 1;
  return x < 1.0 && z < 20.0 ? 2 : 0;
}

// Labels of grid g: label_at each voxel centre (origin + direction · spacing ⊙ index).
std::vector<uint8_t> labels_on(const io::VolumeGrid& g) {
  std::vector<uint8_t> labels;
  const auto& s = g.geo.spacing;
  const auto& d = g.geo.direction;
  const auto& o = g.geo.origin;
  for (int64_t k = 0; k < g.extent[0]; ++k)
    for (int64_t j = 0; j < g.extent[1]; ++j)
      for (int64_t i = 0; i < g.extent[2]; ++i) {
        const double u = i * s[0], v = j * s[1], w = k * s[2];
        labels.push_back(label_at(o[0] + d[0] * u + d[1] * v + d[2] * w, o[1] + d[3] * u + d[4] * v + d[5] * w,
                                  o[2] + d[6] * u + d[7] * v + d[8] * w));
      }
  return labels;
}

void write_labels(const std::string& path, const io::VolumeGrid& g, const std::vector<uint8_t>& labels) {
  io::LabelVolumeWriter writer(path, g.extent, g.geo);
  Block<uint8_t> block(Index{1, g.extent[0], g.extent[1], g.extent[2]});
  block.data = labels;
  writer.write(Box{{0, 0, 0}, g.extent}, block);
  writer.commit();
}

std::vector<uint8_t> voxels(const ImageSource& image) {
  const Block<float> b = image.read(Box{Index(3, 0), image.info().extent});
  return std::vector<uint8_t>(b.data.begin(), b.data.end());
}

TEST(NetworkGrid, FlippedAnisotropicCaseRoundTripsLabelInEqualsLabelOut) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-network-grid-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const io::VolumeGrid g = flipped_case();
  const std::vector<uint8_t> truth = labels_on(g);
  int64_t ones = 0, twos = 0;
  for (uint8_t v : truth) ones += v == 1, twos += v == 2;
  ASSERT_GT(ones, 100);
  ASSERT_GT(twos, 100);
  write_labels((dir / "in.nii.gz").string(), g, truth);
  const auto in = io::open_image((dir / "in.nii.gz").string());

  // The network's grid: 1.5 mm slices (an exact half of 3), LPS order.
  VolumeResampling r;
  r.spacing = {0.8, 0.9, 1.5};
  const auto net = to_network_grid(*in, r, /*is_labels=*/true);
  ASSERT_TRUE(net);
  const io::VolumeGrid ng = io::grid_of(net->info());
  EXPECT_EQ(ng.geo.direction, (std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(ng.extent, (Index{24, 20, 16}));
  // Every other slice of the network's grid is a slice of the case: there the labels are the
  // anatomy at that LPS position (the array reads left to right, feet to head).
  const std::vector<uint8_t> on_net = voxels(*net), expected = labels_on(ng);
  const int64_t plane = ng.extent[1] * ng.extent[2];
  int64_t differ = 0;
  for (int64_t k = 0; k < ng.extent[0]; k += 2)
    for (int64_t at = k * plane; at < (k + 1) * plane; ++at) differ += on_net[size_t(at)] != expected[size_t(at)];
  EXPECT_EQ(differ, 0);

  // Back onto the case's own grid and orientation as infer writes it (certain class
  // probabilities, interpolated, argmax), through the real writer and reader.
  {
    io::ResamplingProbabilitySink sink(
        std::make_unique<io::LabelVolumeWriter>((dir / "out.nii.gz").string(), g.extent, g.geo), 3, ng,
        io::grid_of(in->info()), 255);
    const size_t n = on_net.size();
    Block<float> certain(Index{3, ng.extent[0], ng.extent[1], ng.extent[2]});
    for (size_t i = 0; i < n; ++i) certain.data[on_net[i] * n + i] = 1.f;
    sink.write(Box{{0, 0, 0}, ng.extent}, certain);
    sink.commit();
  }
  const auto out = io::open_image((dir / "out.nii.gz").string());
  EXPECT_TRUE(io::grid_of(out->info()) == io::grid_of(in->info()));
  EXPECT_EQ(voxels(*out), truth);
  fs::remove_all(dir);
}

TEST(NetworkGrid, MedianSpacingIsTakenPerLpsAxis) {
  // Two cases, one with x and y swapped in its index order: per LPS axis both are 0.5 × 2 mm.
  io::VolumeGrid a;
  a.extent = {4, 6, 8};
  a.geo.spacing = {0.5, 2.0, 3.0};
  a.geo.origin = {0, 0, 0};
  a.geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  io::VolumeGrid b = a;
  b.extent = {4, 8, 6};
  b.geo.spacing = {2.0, 0.5, 3.0};
  b.geo.direction = {0, 1, 0, 1, 0, 0, 0, 0, 1};  // index x runs along LPS y, index y along x
  std::vector<std::unique_ptr<ImageSource>> images;
  for (const io::VolumeGrid& g : {a, b}) {
    ImageInfo info;
    info.kind = "volume";
    info.path = "case.nii.gz";
    info.extent = g.extent;
    info.geo = g.geo;
    images.push_back(std::make_unique<io::MemoryVolume>(info, std::vector<float>(size_t(4 * 6 * 8), 0.f)));
  }
  const VolumeResampling r = choose_resampling(ResampleConfig{}, {images[0].get(), images[1].get()}, "test.yaml");
  EXPECT_EQ(r.spacing, (std::vector<double>{0.5, 2.0, 3.0}));
  // And b comes onto that grid with a's extent: its axes swapped back.
  const auto moved = to_network_grid(*images[1], r, false);
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->info().extent, a.extent);
}

// --auto's fingerprint of data.pairs leaves out the holdout that training leaves out. A case
// stored with x and y swapped and z reversed (index x runs along LPS y, index y along LPS x,
// index z towards the feet) is held out, once along z and once along x, in LPS order as
// training does on its reoriented array; the fingerprint must count the labels of the voxels
// training keeps, and report that region's extent and spacing per LPS axis.
TEST(NetworkGrid, FingerprintLeavesOutTheHoldoutTrainingLeavesOut) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-holdout-print-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  io::VolumeGrid g;
  g.extent = {12, 16, 20};  // (z, y, x): LPS z 12, LPS x 16, LPS y 20
  g.geo.spacing = {0.9, 0.8, 3.0};
  g.geo.origin = {-5.0, -10.0, 40.0};
  g.geo.direction = {0, 1, 0, 1, 0, 0, 0, 0, -1};
  const std::string path = (dir / "case.nii.gz").string();
  write_labels(path, g, labels_on(g));
  RunConfig c;
  PairConfig pair;
  pair.image = pair.labels = path;
  c.data.pairs.push_back(pair);
  c.data.class_names = {"background", "one", "two"};
  c.model.options.classes = 3;
  // Training's array: the case on its own spacing per LPS axis (a reordering), LPS order.
  VolumeResampling r;
  r.spacing = {0.8, 0.9, 3.0};
  const auto in = io::open_image(path);
  const auto net = to_network_grid(*in, r, /*is_labels=*/true);
  ASSERT_TRUE(net);
  const Index& e = net->info().extent;
  ASSERT_EQ(e, (Index{12, 20, 16}));
  const std::vector<uint8_t> on_net = voxels(*net);
  for (const Holdout& holdout : {Holdout{"z", 0.25}, Holdout{"x", 0.125}}) {
    const std::string& axis = holdout.axis;
    c.data.holdout = holdout;
    const Box kept = training_region(e, c.data.holdout);
    std::vector<double> counts(3, 0);
    for (int64_t z = kept.origin[0]; z < kept.origin[0] + kept.size[0]; ++z)
      for (int64_t y = kept.origin[1]; y < kept.origin[1] + kept.size[1]; ++y)
        for (int64_t x = kept.origin[2]; x < kept.origin[2] + kept.size[2]; ++x) ++counts[on_net[size_t((z * e[1] + y) * e[2] + x)]];
    ASSERT_GT(counts[1], 0) << axis;
    ASSERT_GT(counts[2], 0) << axis;
    const double total = counts[0] + counts[1] + counts[2];
    const DatasetFingerprint f = fingerprint_run_data(c, "");
    ASSERT_EQ(f.cases.size(), 1u);
    EXPECT_EQ(f.cases[0].extent, kept.size) << axis;
    ASSERT_EQ(f.cases[0].spacing.size(), 3u);
    for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(f.cases[0].spacing[k], (std::vector<double>{3.0, 0.9, 0.8})[k], 1e-6) << axis;
    ASSERT_EQ(f.class_fractions.size(), 3u);
    for (size_t k = 0; k < 3; ++k) EXPECT_DOUBLE_EQ(f.class_fractions[k], counts[k] / total) << axis << " class " << k;
  }
  // Without resampling training keeps the file's axis order, and so does the fingerprint.
  c.data.resample.enabled = false;
  c.data.holdout = Holdout{"z", 0.25};
  EXPECT_EQ(fingerprint_run_data(c, "").cases[0].extent, training_region(g.extent, c.data.holdout).size);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::engine
