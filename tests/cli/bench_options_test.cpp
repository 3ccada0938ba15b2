// The benches' options (cli/bench/bench_*_options.hpp), as Ceres tests its solver options:
// the defaults pass validate() and a bad value is refused naming its flag; and every flag of
// a bench command sets the field its key names, and only it (tests/lib/flag_fields.hpp).
#include <gtest/gtest.h>

#include "bench_allreduce_options.hpp"
#include "bench_compose_options.hpp"
#include "bench_dsn_options.hpp"
#include "bench_infer_options.hpp"
#include "bench_pipeline_options.hpp"
#include "bench_simulate_options.hpp"
#include "bench_spatial_options.hpp"
#include "bench_train_options.hpp"
#include "error_of.hpp"
#include "flag_fields.hpp"

namespace tessera::bench {
namespace {

using test::every_flag_sets_its_field;

// validate() refuses `o` with a tessera::Error whose message holds `named` (the flag).
template <class O>
void expect_refused(const O& o, const std::string& named) {
  const std::string e = test::error_of([&] { o.validate(); });
  EXPECT_NE(e.find(named), std::string::npos) << "expected a refusal naming " << named << ", got: " << e;
}

TEST(BenchInferOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(BenchInferOptions().validate());
  BenchInferOptions o;
  o.small_tile = "big";
  expect_refused(o, "--small-tile 'big'");
  o = BenchInferOptions();
  o.memory_scenes = {"2048x2048", "2048x0"};
  expect_refused(o, "--memory-scenes: '2048x0'");
  o = BenchInferOptions();
  o.memory_scenes = {"64x64x64"};
  expect_refused(o, "--memory-scenes: '64x64x64' is not a 2-D scene");
  o = BenchInferOptions();
  o.runs = 0;
  expect_refused(o, "--runs");
  o = BenchInferOptions();
  o.volume = 96;
  o.volume_model = "unet-tiny";
  expect_refused(o, "--volume-model unet-tiny");
}

TEST(BenchInferOptions, EveryFlagSetsItsField) { EXPECT_EQ(every_flag_sets_its_field<BenchInferOptions>(), ""); }

TEST(BenchTrainOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(BenchTrainOptions().validate());
  BenchTrainOptions o;
  o.global_batch = 5;  // 2 ranks
  expect_refused(o, "--global-batch must be a multiple of --ranks");
  o = BenchTrainOptions();
  o.ranks = 0;
  expect_refused(o, "--ranks: must be >= 1");
}

TEST(BenchTrainOptions, EveryFlagSetsItsField) { EXPECT_EQ(every_flag_sets_its_field<BenchTrainOptions>(), ""); }

TEST(BenchAllreduceOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(BenchAllreduceOptions().validate());
  BenchAllreduceOptions o;
  o.backend = "gloo";
  expect_refused(o, "--backend 'gloo'");
  o = BenchAllreduceOptions();
  o.max_bytes = o.min_bytes - 1;
  expect_refused(o, "--max-bytes");
}

TEST(BenchAllreduceOptions, EveryFlagSetsItsField) {
  EXPECT_EQ(every_flag_sets_its_field<BenchAllreduceOptions>(), "");
}

TEST(BenchDsnOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(BenchDsnOptions().validate());
  BenchDsnOptions o;
  o.similarity = "cosine";
  expect_refused(o, "--similarity");
  o = BenchDsnOptions();
  o.targets = {1, 0};
  expect_refused(o, "--targets");
}

TEST(BenchDsnOptions, EveryFlagSetsItsField) { EXPECT_EQ(every_flag_sets_its_field<BenchDsnOptions>(), ""); }

TEST(BenchPipelineOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(BenchPipelineOptions().validate());
  BenchPipelineOptions o;
  o.micro = {1, 16};  // batch 8
  expect_refused(o, "--micro");
  o = BenchPipelineOptions();
  o.activation_checkpoint = "sometimes";
  expect_refused(o, "--activation-checkpoint");
  o = BenchPipelineOptions();
  o.balance = "even";
  expect_refused(o, "--balance");
}

TEST(BenchPipelineOptions, EveryFlagSetsItsField) {
  EXPECT_EQ(every_flag_sets_its_field<BenchPipelineOptions>(), "");
}

TEST(BenchSpatialOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(BenchSpatialOptions().validate());
  BenchSpatialOptions o;
  o.ranks = {1, -2};
  expect_refused(o, "--ranks");
  o = BenchSpatialOptions();
  o.worker = "cap";  // without --memory-cap
  expect_refused(o, "--worker: 'cap'");
}

TEST(BenchSpatialOptions, EveryFlagSetsItsField) { EXPECT_EQ(every_flag_sets_its_field<BenchSpatialOptions>(), ""); }

TEST(BenchComposeOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(BenchComposeOptions().validate());
  BenchComposeOptions o;
  o.layouts = {"pp2xsp2", "dp2xdp2"};
  expect_refused(o, "--layouts: 'dp2xdp2'");
  o = BenchComposeOptions();
  o.tile = 60;  // unet-tiny's alignment is 8
  expect_refused(o, "--tile");
  const GridLayoutSpec g = parse_grid_layout("sp2×dp2×pp2");
  EXPECT_EQ(g.ranks(), 8);
  EXPECT_EQ(g.text(), "dp2×pp2×sp2");
  EXPECT_EQ(parse_grid_layout("dp1").text(), "dp1");
}

TEST(BenchComposeOptions, EveryFlagSetsItsField) { EXPECT_EQ(every_flag_sets_its_field<BenchComposeOptions>(), ""); }

TEST(BenchSimulateOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(BenchSimulateOptions().validate());
  BenchSimulateOptions o;
  o.micro = {1, 3};  // batch 8
  expect_refused(o, "--micro: each M must divide --batch");
  o = BenchSimulateOptions();
  o.tile = 50;  // unet-tiny's alignment is 8
  expect_refused(o, "--tile must be a positive multiple of");
}

TEST(BenchSimulateOptions, EveryFlagSetsItsField) {
  EXPECT_EQ(every_flag_sets_its_field<BenchSimulateOptions>(), "");
}

}  // namespace
}  // namespace tessera::bench
