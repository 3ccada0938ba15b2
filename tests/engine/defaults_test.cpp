// DefaultsAreValid for every options struct of the tree that had none (issue 26): the
// defaults, with only the fields a struct requires given, pass its validate(); and the
// required fields are required (so that the test can fail: a validate() that accepts
// anything passes the first half only).
#include <gtest/gtest.h>

#include "error_of.hpp"

#include "tessera/core/dsn_spec.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/tile_grid.hpp"
#include "tessera/core/unet_spec.hpp"
#include "tessera/engine/infer_options.hpp"
#include "tessera/parallel/modes/data_parallel.hpp"
#include "tessera/parallel/modes/device_monitor.hpp"
#include "tessera/parallel/modes/pipeline.hpp"
#include "tessera/parallel/modes/pipeline_hooks.hpp"
#include "tessera/parallel/modes/sample_parallel.hpp"
#include "tessera/parallel/plan/plan.hpp"

namespace tessera {
namespace {

TEST(InferenceOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(InferenceOptions().validate(UNetOptions()));
  InferenceOptions none;
  none.batch = 0;
  EXPECT_THROW(none.validate(UNetOptions()), Error);
}

TEST(TileGridOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(TileGridOptions(Index{512, 512}).validate());
  EXPECT_THROW(TileGridOptions(Index{}).validate(), Error);  // the image extent is required
}

TEST(DsnOptions, DefaultsAreValid) {
  // A DSN needs a `same`-padding U-Net without batch norm (dsn_spec.hpp).
  UNetOptions unet;
  unet.padding = Padding::kSame;
  unet.norm = Norm::kGroup;
  EXPECT_NO_THROW(DsnOptions().validate(unet));
  unet.padding = Padding::kValid;
  EXPECT_THROW(DsnOptions().validate(unet), Error);
}

TEST(PipelineOptions, DefaultsAreValid) {
  UNetOptions model;
  model.norm = Norm::kNone;
  const LayerSequence seq = unet_layer_sequence(model, 220);
  const int layers = static_cast<int>(seq.size());
  EXPECT_NO_THROW(parallel::PipelineOptions({layers - 1, 1}).validate(seq));
  EXPECT_THROW(parallel::PipelineOptions({layers, 1}).validate(seq), Error);  // one layer too many
}

TEST(PipelineHookOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(parallel::PipelineHookOptions().validate());
  EXPECT_THROW(parallel::PipelineHookOptions().with_micro_batches(-1).validate(), Error);
}

TEST(DataParallelOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(parallel::DataParallelOptions().validate());
  EXPECT_THROW(parallel::DataParallelOptions().with_fusion_bytes(0).validate(), Error);
}

TEST(SampleParallelOptions, DefaultsAreValid) {
  parallel::SampleParallelOptions o;
  EXPECT_THROW(o.validate(), Error);  // run_dir is required
  o.run_dir = "run";
  EXPECT_NO_THROW(o.validate());
}

TEST(DeviceMonitorOptions, DefaultsAreValid) {
  parallel::DeviceMonitorOptions o;
  EXPECT_THROW(o.validate(), Error);  // run_dir is required
  o.run_dir = "run";
  EXPECT_NO_THROW(o.validate());
}

TEST(PlanOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(parallel::PlanOptions(UNetOptions(), Index{1024, 1024}, 4, int64_t{16} << 30).validate());
  EXPECT_THROW(parallel::PlanOptions(UNetOptions(), Index{1024, 1024}, 0, int64_t{16} << 30).validate(), Error);
}

TEST(InferOptions, DefaultsAreValid) {
  engine::InferOptions o;
  EXPECT_THROW(o.validate(), Error);  // --input and --output are required
  o.input = "scene.tif";
  o.output = "labels.tif";
  o.checkpoint = "model.pt";
  EXPECT_NO_THROW(o.validate());
}

// --input / --store dicomweb://: each refusal names its flag, before any request is made.
TEST(InferOptions, DicomWebAddressesAreCheckedByTheirFlags) {
  engine::InferOptions o;
  o.checkpoint = "model.pt";
  o.input = "dicomweb://pacs:8042/dicom-web/studies/1.2.3/series/1.2.3.4";
  o.output = "seg.dcm";
  o.store = "dicomweb://pacs:8042/dicom-web";
  EXPECT_NO_THROW(o.validate());
  const auto refusal = [](engine::InferOptions bad) { return test::error_of([&] { bad.validate(); }); };
  engine::InferOptions bad = o;
  bad.input = "dicomweb://pacs:8042/dicom-web/studies/1.2.3";
  EXPECT_NE(refusal(bad).find("--input dicomweb://pacs:8042/dicom-web/studies/1.2.3: name the series"), std::string::npos);
  bad = o;
  bad.output = "labels.nii.gz";
  EXPECT_NE(refusal(bad).find("--store dicomweb://pacs:8042/dicom-web: sends the DICOM SEG"), std::string::npos);
  bad = o;
  bad.store = o.input;
  EXPECT_NE(refusal(bad).find("not a series"), std::string::npos);
  bad = o;
  bad.series = "1.2.3.4";
  EXPECT_NE(refusal(bad).find("--series 1.2.3.4: not with --input dicomweb://"), std::string::npos);
  bad = o;
  bad.store = "https://pacs/dicom-web";
  EXPECT_NE(refusal(bad).find("--store https://pacs/dicom-web: not a dicomweb://"), std::string::npos);
}

}  // namespace
}  // namespace tessera
