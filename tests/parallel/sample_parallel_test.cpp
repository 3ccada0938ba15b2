// Sample-parallel inference over MPI ranks writes the same mosaic as one process, keeps
// georeferencing, and a rerun after lost or damaged tiles recomputes only those.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gdal.h>

#include "tessera/core/inference.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/io/volume.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/parallel/modes/sample_parallel.hpp"

namespace tessera::parallel {
namespace {

namespace fs = std::filesystem;

// Same directory on every rank: rank 0's pid, broadcast.
std::string shared_dir(const std::string& name) {
  torch::Tensor pid = torch::tensor({int64_t(::getpid())});
  world().broadcast(pid, 0);
  const auto d = fs::temp_directory_path() / ("tessera-sp-" + std::to_string(pid.item<int64_t>()) + "-" + name);
  if (world().rank() == 0) fs::create_directories(d);
  world().barrier();
  return d.string();
}

void write_scene(const std::string& path, int height, int width) {
  io::init_gdal();
  GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), path.c_str(), width, height, 3, GDT_Float32, nullptr);
  ASSERT_TRUE(ds);
  double gt[6] = {500000, 10, 0, 4200000, 0, -10};
  GDALSetGeoTransform(ds, gt);
  std::vector<float> v(size_t(width) * height);
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x) v[size_t(y) * width + x] = std::sin(0.05f * x * (c + 1)) + std::cos(0.09f * y);
    ASSERT_EQ(GDALRasterIO(GDALGetRasterBand(ds, c + 1), GF_Write, 0, 0, width, height, v.data(), width, height,
                           GDT_Float32, 0, 0),
              CE_None);
  }
  GDALClose(ds);
}

UNet random_net(int dims, int channels) {
  torch::manual_seed(11);
  UNetOptions o = dims == 2 ? unet_preset("unet-tiny") : unet_preset("unet3d-tiny");
  o.with_in_channels(channels).with_classes(4).with_base_filters(4);
  return UNet(o);
}

std::vector<float> pixels(const std::string& path) {
  auto img = io::open_image(path);
  Block<float> b = img->read(Box{Index(img->info().extent.size(), 0), img->info().extent});
  for (float& x : b.data)
    if (std::isnan(x)) x = -1;  // nodata compares equal to nodata
  return b.data;
}

TEST(SampleParallel, MosaicIdenticalToSingleProcessAndRerunResumes) {
  Communicator& w = world();
  const std::string dir = shared_dir("raster");
  const std::string scene = dir + "/scene.tif", single = dir + "/single.tif", mosaic = dir + "/mosaic.tif";
  if (w.rank() == 0) write_scene(scene, 150, 230);
  w.barrier();
  auto image = io::open_image(scene);
  const Normalization norm = io::default_normalization(*image);
  UNet net = random_net(2, 3);
  const auto options = InferenceOptions().with_tile(32).with_batch(2).with_progress(false);
  if (w.rank() == 0) {
    auto sink = io::create_label_sink(single, image->info());
    infer_labels(net, *image, norm, *sink, options);
    sink->commit();
  }
  SampleParallelOptions sp;
  sp.run_dir = dir + "/run";
  sp.inference = options;
  const auto r = infer_sample_parallel(net, *image, norm, mosaic, w, sp);
  EXPECT_EQ(r.tiles, 5 * 8);
  EXPECT_EQ(r.tiles_skipped, 0);
  torch::Tensor here = torch::tensor({r.tiles_here});
  w.allreduce(here, ReduceOp::kSum);
  EXPECT_EQ(here.item<int64_t>(), r.tiles);  // every tile computed exactly once

  if (w.rank() == 0) {
    EXPECT_EQ(pixels(mosaic), pixels(single));
    auto a = io::open_image(mosaic), b = io::open_image(single);
    EXPECT_EQ(a->info().geo.geotransform, b->info().geo.geotransform);
    EXPECT_EQ(a->info().extent, b->info().extent);
    EXPECT_TRUE(fs::exists(fs::path(r.tiles_dir) / "mosaic.vrt"));
    // Lose one tile, damage another, leave a partial file as a killed writer would.
    fs::remove(fs::path(r.tiles_dir) / "tile-0000003.tif");
    std::ofstream(fs::path(r.tiles_dir) / "tile-0000017.tif", std::ios::trunc) << "not a tiff";
    std::ofstream(fs::path(r.tiles_dir) / "tile-0000020.tif.partial-99999") << "half";
    fs::remove(mosaic);
  }
  w.barrier();
  const auto again = infer_sample_parallel(net, *image, norm, mosaic, w, sp);
  EXPECT_EQ(again.tiles_skipped, again.tiles - 2);
  if (w.rank() == 0) {
    EXPECT_EQ(pixels(mosaic), pixels(single));
    EXPECT_FALSE(fs::exists(fs::path(r.tiles_dir) / "tile-0000020.tif.partial-99999"));
  }
  w.barrier();
  if (w.rank() == 0) fs::remove_all(dir);
}

TEST(SampleParallel, VolumeTilesArePastedIntoTheSameVolume) {
  Communicator& w = world();
  const std::string dir = shared_dir("volume");
  const std::string ct = dir + "/ct.nrrd", single = dir + "/single.nrrd", mosaic = dir + "/mosaic.nrrd";
  const Index extent{16, 24, 24};
  if (w.rank() == 0) {
    Georeference geo;
    geo.spacing = {0.8, 0.8, 2.5};
    geo.origin = {-100, -120, 30};
    geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    std::vector<float> v(size_t(extent[0] * extent[1] * extent[2]));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(200 * std::sin(0.01 * double(i)));
    io::write_volume(ct, extent, geo, v, true);
  }
  w.barrier();
  auto image = io::open_image(ct);
  const Normalization norm = io::default_normalization(*image);
  UNet net = random_net(3, 1);
  const auto options = InferenceOptions().with_tile(8).with_progress(false);
  if (w.rank() == 0) {
    auto sink = io::create_label_sink(single, image->info());
    infer_labels(net, *image, norm, *sink, options);
    sink->commit();
  }
  SampleParallelOptions sp;
  sp.run_dir = dir + "/run";
  sp.inference = options;
  infer_sample_parallel(net, *image, norm, mosaic, w, sp);
  if (w.rank() == 0) {
    EXPECT_EQ(pixels(mosaic), pixels(single));
    auto a = io::open_image(mosaic), b = io::open_image(single);
    EXPECT_EQ(a->info().geo.origin, b->info().geo.origin);
    EXPECT_EQ(a->info().geo.spacing, b->info().geo.spacing);
    fs::remove_all(dir);
  }
  w.barrier();
}

// Streamed, the ranks take bands of rows (band_rows) and stream each: the mosaic equals one
// process streaming the whole image, and a lost band is recomputed alone.
TEST(SampleParallel, StreamedBandsMosaicIdenticalToOneProcessStreaming) {
  Communicator& w = world();
  const std::string dir = shared_dir("bands");
  const std::string scene = dir + "/scene.tif", single = dir + "/single.tif", mosaic = dir + "/mosaic.tif";
  if (w.rank() == 0) write_scene(scene, 141, 97);
  w.barrier();
  auto image = io::open_image(scene);
  const Normalization norm = io::default_normalization(*image);
  UNet net = random_net(2, 3);
  const auto stream = InferenceOptions().with_strip(16).with_progress(false);
  if (w.rank() == 0) {
    auto sink = io::create_label_sink(single, image->info());
    infer_labels(net, *image, norm, *sink, stream);
    sink->commit();
  }
  SampleParallelOptions sp;
  sp.run_dir = dir + "/run";
  sp.inference = stream;
  sp.inference.with_band(band_rows(net->options(), image->info().extent, w.size()));
  const auto r = infer_sample_parallel(net, *image, norm, mosaic, w, sp);
  EXPECT_EQ(r.tiles, w.size());
  torch::Tensor here = torch::tensor({r.tiles_here});
  w.allreduce(here, ReduceOp::kSum);
  EXPECT_EQ(here.item<int64_t>(), r.tiles);  // every band streamed exactly once
  torch::Tensor recompute = torch::tensor({r.recompute}, torch::kDouble);
  w.allreduce(recompute, ReduceOp::kSum);
  EXPECT_GT(recompute.item<double>(), 1.0);  // each band's halo once
  EXPECT_LE(recompute.item<double>(), band_recompute(net->options(), image->info().extent, sp.inference.band) + 1e-9);
  if (w.rank() == 0) {
    EXPECT_EQ(pixels(mosaic), pixels(single));
    fs::remove(fs::path(r.tiles_dir) / "tile-0000001.tif");
    fs::remove(mosaic);
  }
  w.barrier();
  const auto again = infer_sample_parallel(net, *image, norm, mosaic, w, sp);
  EXPECT_EQ(again.tiles_skipped, again.tiles - 1);
  if (w.rank() == 0) EXPECT_EQ(pixels(mosaic), pixels(single));
  w.barrier();
  if (w.rank() == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera::parallel
