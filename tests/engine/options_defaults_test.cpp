// DefaultsAreValid for the options structs of core, io and parallel that had no such test
// (the rest: tests/cli/options_test.cpp, tests/engine/defaults_test.cpp and the module tests).
// Each test also shows that one bad value is refused, naming its field: a validate() that
// accepted everything would fail here. Two structs have no validate(), on purpose:
// SpatialHookOptions (two booleans) and the plugin ABI's ModelOptions (every field optional;
// each plugin's factory refuses what it does not understand, tests/plugins).
#include <string>

#include <gtest/gtest.h>

#include "error_of.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/core/tile_choice.hpp"
#include "tessera/core/unet_blocks.hpp"
#include "tessera/io/hausdorff.hpp"
#include "tessera/io/normalization.hpp"
#include "tessera/io/probability_raster.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/io/rasterize.hpp"
#include "tessera/io/reproject.hpp"
#include "tessera/io/stac.hpp"
#include "tessera/io/vector_export.hpp"
#include "tessera/parallel/plan/cluster.hpp"
#include "tessera/parallel/plan/simulator.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"

namespace tessera {
namespace {

using test::error_of;

#define EXPECT_REFUSED_NAMING(call, field) \
  EXPECT_NE(error_of([&] { call; }).find(field), std::string::npos) << error_of([&] { call; })

TEST(ConvBlockOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(ConvBlockOptions(2, 3, 8).validate());
  EXPECT_REFUSED_NAMING(ConvBlockOptions(2, 3, 8).with_kernel(4).validate(), "kernel");
  EXPECT_REFUSED_NAMING(ConvBlockOptions(4, 3, 8).validate(), "dims");
}

TEST(ForegroundStatisticsOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(io::ForegroundStatisticsOptions().validate());
  io::ForegroundStatisticsOptions o;
  o.low_percentile = 99.9;
  EXPECT_REFUSED_NAMING(o.validate(), "percentiles");
}

TEST(HausdorffOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(io::HausdorffOptions().validate());
  EXPECT_REFUSED_NAMING(io::HausdorffOptions().with_percentile(101).validate(), "percentile");
}

TEST(LabelRasterOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(io::LabelRasterOptions("labels.tif", Index{64, 64}, Georeference{}).validate());
  io::LabelRasterOptions o("labels.tif", Index{64, 64}, Georeference{});
  o.block = 100;
  EXPECT_REFUSED_NAMING(o.validate(), "block");
}

TEST(ProbabilityRasterOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(io::ProbabilityRasterOptions("probs.tif", Index{64, 64}, Georeference{}, 3).validate());
  EXPECT_REFUSED_NAMING(io::ProbabilityRasterOptions("probs.tif", Index{64, 64}, Georeference{}, 0).validate(), "classes");
}

TEST(RasterizeOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(io::RasterizeOptions().validate());
  EXPECT_REFUSED_NAMING(io::RasterizeOptions().with_background(255).validate(), "background");
}

TEST(StacItemOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(io::StacItemOptions("scene", "scene_labels.tif").validate());
  EXPECT_REFUSED_NAMING(io::StacItemOptions("scene", "scene_labels.tif").with_datetime("yesterday").validate(), "datetime");
}

TEST(VectorizeOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(io::VectorizeOptions().validate());
  EXPECT_REFUSED_NAMING(io::VectorizeOptions().with_min_area(-1).validate(), "min_area");
}

TEST(WarpOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(io::WarpOptions("EPSG:3857").validate());
  EXPECT_REFUSED_NAMING(io::WarpOptions("EPSG:3857").with_resolution(0).validate(), "resolution");
}

TEST(TileChoiceOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(TileChoiceOptions().validate());
  EXPECT_REFUSED_NAMING(TileChoiceOptions().with_min_tiles(0).validate(), "min_tiles");
}

TEST(StageMemoryOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(StageMemoryOptions().validate());
  EXPECT_REFUSED_NAMING(StageMemoryOptions().with_micro_batches(0).validate(), "micro_batches");
}

TEST(SpatialPlanOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(parallel::SpatialPlanOptions().validate());
  EXPECT_REFUSED_NAMING(parallel::SpatialPlanOptions().with_bytes_per_second(0).validate(), "bytes_per_second");
}

TEST(SimulationOptions, DefaultsAreValid) {
  const parallel::ClusterModel cluster;
  EXPECT_NO_THROW(cluster.validate());
  const LayerSequence seq = unet_layer_sequence(unet_preset("unet-tiny"), 132);
  EXPECT_NO_THROW(parallel::SimulationOptions(seq).validate(cluster));
  EXPECT_REFUSED_NAMING(parallel::SimulationOptions(seq).with_micro_batches(0).validate(cluster), "--micro-batches");
}

}  // namespace
}  // namespace tessera
