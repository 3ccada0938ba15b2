// The options of plan, simulate, export, import, model-info, info and eval (issue 26): the
// defaults, with only what a command requires given, pass validate(), a bad value is refused
// naming its flag, and each flag sets the field its key names and no other
// (tests/lib/flag_fields.hpp).
#include <gtest/gtest.h>

#include <string>

#include "flag_fields.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/evaluation.hpp"
#include "tessera/engine/export_options.hpp"
#include "tessera/engine/image_info_options.hpp"
#include "tessera/engine/infer_options.hpp"
#include "tessera/engine/model_info_options.hpp"
#include "tessera/engine/plan_options.hpp"
#include "tessera/engine/postprocessing.hpp"
#include "tessera/engine/simulate_options.hpp"

namespace tessera {
namespace {

// validate()'s message, or "" when it accepts.
template <class O>
std::string refusal(const O& o) {
  try {
    o.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_REFUSED_NAMING(options, flag) EXPECT_NE(refusal(options).find(flag), std::string::npos) << refusal(options)

// --mode: its values, and what a stream cannot join, each refusal naming the flag.
TEST(InferOptions, ModeRefusesWhatAStreamCannotJoin) {
  engine::InferOptions o;
  o.input = "scene.tif";
  o.output = "labels.tif";
  o.checkpoint = "model.pt";
  for (const char* mode : {"auto", "tile", "stream"}) {
    o.mode = mode;
    EXPECT_EQ(refusal(o), "") << mode;
  }
  o.mode = "sideways";
  EXPECT_REFUSED_NAMING(o, "--mode");
  o.mode = "stream";
  o.tile = "64";
  EXPECT_REFUSED_NAMING(o, "--tile 64");
  o.mode = "tile";
  EXPECT_EQ(refusal(o), "");
  o.mode = "stream";
  o.tile = "auto";
  o.run_dir = "run";
  EXPECT_EQ(refusal(o), "") << "ranks sharing one image stream bands of it";
  o.run_dir = "";
  o.sp = 2;
  EXPECT_REFUSED_NAMING(o, "--sp");
}

// --window and --tta: their values, and what Gaussian windows cannot join, naming the flag.
TEST(InferOptions, WindowRefusesWhatWindowsCannotJoin) {
  engine::InferOptions o;
  o.input = "scene.tif";
  o.output = "labels.tif";
  o.checkpoint = "model.pt";
  for (const char* window : {"auto", "gaussian", "exact"}) {
    o.window = window;
    EXPECT_EQ(refusal(o), "") << window;
  }
  o.window = "sideways";
  EXPECT_REFUSED_NAMING(o, "--window");
  o.window = "auto";
  o.tta = "flip";
  EXPECT_REFUSED_NAMING(o, "--tta");
  o.tta = "mirror";
  EXPECT_EQ(refusal(o), "");
  o.window = "exact";
  EXPECT_REFUSED_NAMING(o, "--tta mirror");
  o.tta = "none";
  o.window = "gaussian";
  o.tile = "64";
  EXPECT_REFUSED_NAMING(o, "--tile 64");
  o.tile = "auto";
  o.mode = "tile";
  EXPECT_REFUSED_NAMING(o, "--mode tile");
  o.mode = "auto";
  o.sp = 2;
  EXPECT_REFUSED_NAMING(o, "--sp 2");
}

TEST(PlanJobOptions, DefaultsAreValid) {
  engine::PlanJobOptions o;
  EXPECT_REFUSED_NAMING(o, "--image");  // required unless --calibrate
  o.image = "512x512";
  EXPECT_EQ(refusal(o), "");
  engine::PlanJobOptions calibrate;
  calibrate.calibrate = true;
  EXPECT_EQ(refusal(calibrate), "");
  calibrate.calibration_batch = 0;
  EXPECT_REFUSED_NAMING(calibrate, "--calibration-batch");
  calibrate.calibration_batch = 4;
  EXPECT_EQ(refusal(calibrate), "");
  o.schedule = "zigzag";
  EXPECT_REFUSED_NAMING(o, "--schedule");
  o.schedule = "gpipe";
  o.activation_checkpoint = "sometimes";
  EXPECT_REFUSED_NAMING(o, "--activation-checkpoint");
  o.activation_checkpoint = "auto";
  o.domains = 2;  // on one device
  EXPECT_REFUSED_NAMING(o, "--domains");
  o.devices = 2;
  EXPECT_EQ(refusal(o), "");
  o.infer = true;  // a DSN trains
  EXPECT_REFUSED_NAMING(o, "--domains");
  engine::PlanJobOptions dataset;
  dataset.dataset = "Task03_Liver";
  EXPECT_EQ(refusal(dataset), "");
  dataset.device_memory = 0;  // this machine's
  EXPECT_EQ(refusal(dataset), "");
  dataset.image = "512x512";
  EXPECT_REFUSED_NAMING(dataset, "--dataset");
}

TEST(PlanJobOptions, EveryFlagSetsItsField) {
  EXPECT_EQ(test::every_flag_sets_its_field<engine::PlanJobOptions>(), "");
}

TEST(SimulateOptions, DefaultsAreValid) {
  engine::SimulateOptions o;
  EXPECT_REFUSED_NAMING(o, "--cluster");  // required
  o.cluster = "clusters/summit.yaml";
  EXPECT_EQ(refusal(o), "");
  o.balance = "even";
  EXPECT_REFUSED_NAMING(o, "--balance");
  o.balance = "time";
  o.micro_batches = 0;
  EXPECT_REFUSED_NAMING(o, "--micro-batches");
  o.micro_batches = 1;
  o.tile = 256;
  o.input_side = 300;  // the inset and the input: one of them
  EXPECT_REFUSED_NAMING(o, "--input-side");
}

TEST(SimulateOptions, EveryFlagSetsItsField) {
  EXPECT_EQ(test::every_flag_sets_its_field<engine::SimulateOptions>(), "");
}

TEST(ExportOptions, DefaultsAreValid) {
  engine::ExportOptions o;
  EXPECT_REFUSED_NAMING(o, "--checkpoint");  // required
  o.checkpoint = "run/checkpoints/last.pt";
  o.out = "model.pt";
  EXPECT_EQ(refusal(o), "");
  o.example_input = "in.pt";
  EXPECT_REFUSED_NAMING(o, "--example-output");
  o.example_output = "out.pt";
  o.example_batch = 0;
  EXPECT_REFUSED_NAMING(o, "--example-batch");
}

TEST(ExportOptions, EveryFlagSetsItsField) {
  EXPECT_EQ(test::every_flag_sets_its_field<engine::ExportOptions>(), "");
}

TEST(ImportOptions, DefaultsAreValid) {
  engine::ImportOptions o;
  EXPECT_REFUSED_NAMING(o, "--weights");  // required
  o.weights = "model.pt";
  o.out = "model.ckpt";
  EXPECT_EQ(refusal(o), "");
}

TEST(ImportOptions, EveryFlagSetsItsField) {
  EXPECT_EQ(test::every_flag_sets_its_field<engine::ImportOptions>(), "");
}

TEST(ModelInfoOptions, DefaultsAreValid) {
  engine::ModelInfoOptions o;
  EXPECT_EQ(refusal(o), "");
  o.config = "run.yaml";
  o.checkpoint = "last.pt";
  EXPECT_REFUSED_NAMING(o, "--checkpoint");
  o.checkpoint.clear();
  o.model_overrides["base_filters"] = "8";
  EXPECT_REFUSED_NAMING(o, "--base-filters");
}

TEST(ModelInfoOptions, EveryFlagSetsItsField) {
  EXPECT_EQ(test::every_flag_sets_its_field<engine::ModelInfoOptions>(), "");
}

TEST(ImageInfoOptions, DefaultsAreValid) {
  engine::ImageInfoOptions o;
  EXPECT_REFUSED_NAMING(o, "--path");  // required
  o.path = "scene.tif";
  EXPECT_EQ(refusal(o), "");
}

TEST(ImageInfoOptions, EveryFlagSetsItsField) {
  EXPECT_EQ(test::every_flag_sets_its_field<engine::ImageInfoOptions>(), "");
}

TEST(EvalOptions, DefaultsAreValid) {
  engine::EvalOptions o;
  EXPECT_REFUSED_NAMING(o, "--pred");  // required
  o.pred = "labels.tif";
  o.truth = "truth.tif";
  EXPECT_EQ(refusal(o), "");
  o.holdout.fraction = 1;
  EXPECT_REFUSED_NAMING(o, "--holdout-fraction");
  o.holdout.fraction = 0.25;
  o.holdout.axis = "w";
  EXPECT_REFUSED_NAMING(o, "--holdout-axis");
  o.holdout.axis = "y";
  o.classes = 256;
  EXPECT_REFUSED_NAMING(o, "--classes");
}

TEST(EvalOptions, EveryFlagSetsItsField) {
  EXPECT_EQ(test::every_flag_sets_its_field<engine::EvalOptions>(), "");
}

TEST(PostprocessOptions, DefaultsAreValid) {
  engine::PostprocessOptions o;
  EXPECT_REFUSED_NAMING(o, "--run");  // required
  o.run = "run";
  EXPECT_REFUSED_NAMING(o, "--pred");
  o.pred = "pred";
  EXPECT_REFUSED_NAMING(o, "--truth");
  o.truth = "truth";
  EXPECT_EQ(refusal(o), "");
  o.classes = 256;
  EXPECT_REFUSED_NAMING(o, "--classes");
}

TEST(PostprocessOptions, EveryFlagSetsItsField) {
  EXPECT_EQ(test::every_flag_sets_its_field<engine::PostprocessOptions>(), "");
}

}  // namespace
}  // namespace tessera
