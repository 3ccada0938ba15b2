#include <gtest/gtest.h>

#include <cmath>

#include "tessera/core/error.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"

namespace tessera::parallel {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

PlanOptions example() { return PlanOptions(unet_preset("unet-small"), {10000, 10000}, 1200, 16 * kGiB); }

// Every field set and consistent with the others, and the memory prediction re-derived from
// the public stage_bytes().
void expect_complete(const PlanOptions& o, const Layout& L) {
  const auto& m = o.model;
  EXPECT_GT(L.tile_inset, 0);
  EXPECT_EQ(L.alignment, unet_alignment(m));
  EXPECT_EQ(L.tile_inset % L.alignment, 0);
  EXPECT_EQ(L.tile_input_side, L.tile_inset + unet_remainder(m) + 2 * unet_halo(m));
  EXPECT_EQ(unet_output_size(m, L.tile_input_side), L.tile_output_side);
  ASSERT_EQ(L.tiles_per_axis.size(), o.image.size());
  int64_t tiles = 1;
  for (size_t i = 0; i < o.image.size(); ++i) {
    EXPECT_EQ(L.tiles_per_axis[i], (o.image[i] + L.tile_inset - 1) / L.tile_inset);
    tiles *= L.tiles_per_axis[i];
  }
  EXPECT_EQ(L.tiles, tiles);
  EXPECT_NEAR(L.halo_overhead, std::pow(double(L.tile_input_side) / double(L.tile_inset), m.dims), 1e-12);
  ASSERT_GE(L.stages, 1);
  ASSERT_EQ(int(L.balance.size()), L.stages);
  ASSERT_EQ(int(L.stage_first_layer.size()), L.stages);
  ASSERT_EQ(int(L.stage_memory_bytes.size()), L.stages);
  ASSERT_EQ(int(L.stage_seconds.size()), L.stages);
  int sum = 0;
  for (int b : L.balance) {
    EXPECT_GE(b, 1);
    sum += b;
  }
  EXPECT_EQ(sum, unet_layer_count(m));
  EXPECT_EQ(L.stage_first_layer[0], "enc0.conv0");
  EXPECT_GE(L.micro_batches, 1);
  EXPECT_GE(L.data_parallel, 1);
  EXPECT_EQ(L.devices_used, L.data_parallel * L.stages);
  EXPECT_LE(L.devices_used, o.devices);
  EXPECT_LE(L.data_parallel, L.tiles);
  EXPECT_EQ(L.steps, (L.tiles + int64_t(L.data_parallel) * L.micro_batches - 1) /
                         (int64_t(L.data_parallel) * L.micro_batches));
  const auto seq = unet_layer_sequence(m, L.tile_input_side);
  auto mo = StageMemoryOptions{}
                .with_micro_batches(L.micro_batches)
                .with_schedule(L.schedule)
                .with_training(o.training)
                .with_checkpoint(L.checkpoint);
  if (o.checkpoint) {
    EXPECT_EQ(L.checkpoint, *o.checkpoint);
  }
  if (!o.memory_calibration.empty()) mo.with_extra_bytes(o.memory_calibration.extra_bytes(seq));
  int64_t peak = 0;
  for (int s = 0, first = 0; s < L.stages; first += L.balance[s], ++s) {
    EXPECT_EQ(L.stage_memory_bytes[s], o.baseline_bytes + stage_bytes(seq, first, first + L.balance[s] - 1, L.stages - s, mo));
    EXPECT_EQ(L.stage_first_layer[s], seq.layers[first].name);
    EXPECT_GT(L.stage_seconds[s], 0);
    peak = std::max(peak, L.stage_memory_bytes[s]);
  }
  EXPECT_EQ(L.peak_memory_bytes, peak);
  EXPECT_LE(L.peak_memory_bytes, o.device_memory_bytes);
  EXPECT_NEAR(L.bubble_fraction, double(L.stages - 1) / (L.micro_batches + L.stages - 1), 1e-12);
  EXPECT_GE(L.step_seconds, (L.micro_batches + L.stages - 1) * *std::max_element(L.stage_seconds.begin(), L.stage_seconds.end()));
  EXPECT_NEAR(L.pass_seconds, double(L.steps) * L.step_seconds, 1e-9 * L.pass_seconds);
  EXPECT_EQ(L.device_flops, o.device_flops);
  EXPECT_GE(L.reasons.size(), 3u);
}

TEST(Planner, ThousandDeviceExampleGivesACompleteLayout) {
  const auto o = example();
  const Layout L = plan(o);
  expect_complete(o, L);
}

TEST(Planner, InferenceAnd3dLayoutsAreComplete) {
  const auto infer = example().with_training(false);
  expect_complete(infer, plan(infer));
  const PlanOptions ct(unet_preset("unet3d-32"), {512, 512, 512}, 64, 8 * kGiB);
  expect_complete(ct, plan(ct));
}

TEST(Planner, MoreMemoryNeverGivesASlowerPlan) {
  for (int devices : {1, 8, 64}) {
    double previous = 1e300;
    for (double gib : {0.8, 1.0, 1.5, 2.0, 4.0, 8.0, 16.0, 64.0}) {
      PlanOptions o(unet_preset("unet-small"), {4096, 4096}, devices, int64_t(gib * double(kGiB)));
      const Layout L = plan(o);
      expect_complete(o, L);
      EXPECT_LE(L.pass_seconds, previous) << devices << " devices, " << gib << " GiB";
      previous = L.pass_seconds;
    }
  }
}

// unet-small's weights, gradients and Adam moments take 16 B × 31 M = 0.46 GiB; with the
// 0.25 GiB baseline no single device of 0.6 GiB holds them, so the planner must cut.
TEST(Planner, TightMemoryForcesAPipelineAndSaysSo) {
  const PlanOptions o(unet_preset("unet-small"), {2048, 2048}, 16, int64_t(0.6 * double(kGiB)));
  const Layout L = plan(o);
  expect_complete(o, L);
  EXPECT_GE(L.stages, 2);
  bool said = false;
  for (const auto& r : L.reasons) said |= r.find("memory binds the pipeline") != std::string::npos;
  EXPECT_TRUE(said);
}

// A memory calibration enters every stage's prediction: the layout stays complete (its
// stage memory re-derived with the extras), and a calibration that adds memory to every
// layer leaves the tight-memory plan needing more stages or a smaller tile, never fewer.
TEST(Planner, CalibratedExtrasEnterTheStageMemory) {
  const UNetOptions m = unet_preset("unet-small");
  const int n = unet_layer_count(m);
  LayerMemoryCalibration cal;
  cal.constant_bytes.assign(size_t(n), double(8 << 20));
  cal.bytes_per_element.assign(size_t(n), 8.0);
  auto o = PlanOptions(m, {2000, 2000}, 16, int64_t(0.6 * double(kGiB)));
  const Layout plain = plan(o);
  o.with_memory_calibration(cal);
  const Layout calibrated = plan(o);
  expect_complete(o, calibrated);
  EXPECT_LE(calibrated.peak_memory_bytes, o.device_memory_bytes);
  const bool costlier = calibrated.stages > plain.stages || calibrated.tile_inset < plain.tile_inset ||
                        calibrated.micro_batches < plain.micro_batches || calibrated.peak_memory_bytes > plain.peak_memory_bytes;
  EXPECT_TRUE(costlier) << "K " << plain.stages << " → " << calibrated.stages << ", T " << plain.tile_inset << " → "
                        << calibrated.tile_inset;
}

// Measured layer times replace the FLOP model's: each stage's seconds are the sum of its
// layers' calibrated times at the chosen tile (seconds per FLOP for convolutions, per element
// for the rest), and a slower calibration gives a slower pass.
TEST(Planner, MeasuredLayerTimesGiveTheStageSeconds) {
  const UNetOptions m = unet_preset("unet-small");
  const auto probe = unet_layer_sequence(m, 316);
  std::vector<double> measured;
  for (int i = 0; i < probe.size(); ++i) measured.push_back(1e-3 * (1 + i % 5));
  const LayerTimeCalibration cal = LayerTimeCalibration::fit(probe, measured);
  const auto back = cal.seconds(probe);
  for (int i = 0; i < probe.size(); ++i) EXPECT_NEAR(back[size_t(i)], measured[size_t(i)], 1e-15);

  auto o = PlanOptions(m, {2000, 2000}, 16, int64_t(0.6 * double(kGiB))).with_time_calibration(cal);
  const Layout L = plan(o);
  expect_complete(o, L);
  const auto seq = unet_layer_sequence(m, L.tile_input_side);
  const auto t = cal.seconds(seq);
  for (int s = 0, first = 0; s < L.stages; first += L.balance[size_t(s)], ++s) {
    double sum = 0;
    for (int i = first; i < first + L.balance[size_t(s)]; ++i) sum += t[size_t(i)];
    EXPECT_NEAR(L.stage_seconds[size_t(s)], sum, 1e-9 * sum) << "stage " << s;
  }
  std::vector<double> slower;
  for (double x : measured) slower.push_back(2 * x);
  o.with_time_calibration(LayerTimeCalibration::fit(probe, slower));
  EXPECT_GT(plan(o).pass_seconds, L.pass_seconds);
  EXPECT_THROW(cal.seconds(unet_layer_sequence(unet_preset("unet-tiny"), 220)), Error);
}

// Unset, activation checkpointing is the planner's choice: the faster of the best layout
// without it and the best with it (whose stage times include the recomputed forward).
TEST(Planner, ChoosesActivationCheckpointingWhenItIsFaster) {
  for (double gib_per_device : {0.6, 0.7, 16.0}) {
    auto o = PlanOptions(unet_preset("unet-small"), {10000, 10000}, 16, int64_t(gib_per_device * double(kGiB)));
    const Layout chosen = plan(o);
    expect_complete(o, chosen);
    const Layout never = plan(PlanOptions(o).with_checkpoint(ActivationCheckpoint::kNever));
    const Layout always = plan(PlanOptions(o).with_checkpoint(ActivationCheckpoint::kAlways));
    expect_complete(PlanOptions(o).with_checkpoint(ActivationCheckpoint::kAlways), always);
    EXPECT_DOUBLE_EQ(chosen.pass_seconds, std::min(never.pass_seconds, always.pass_seconds)) << gib_per_device;
    EXPECT_EQ(chosen.checkpoint, always.pass_seconds < never.pass_seconds ? ActivationCheckpoint::kAlways
                                                                          : ActivationCheckpoint::kNever)
        << gib_per_device;
    bool said = false;
    for (const auto& r : chosen.reasons) said |= r.rfind("activation checkpointing:", 0) == 0;
    EXPECT_TRUE(said) << gib_per_device;
  }
}

TEST(Planner, NothingFitsIsAnErrorNamingDeviceMemory) {
  PlanOptions o = example();
  o.device_memory_bytes = int64_t(0.01 * double(kGiB));
  try {
    plan(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device_memory"), std::string::npos) << e.what();
  }
}

TEST(Planner, ValidateNamesTheBadField) {
  auto expect_field = [](const PlanOptions& o, const std::string& field) {
    try {
      o.validate();
      FAIL() << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  expect_field(PlanOptions(unet_preset("unet-small"), {100, 100, 100}, 4, kGiB), "image");
  expect_field(PlanOptions(unet_preset("unet-small"), {100, 100}, 0, kGiB), "devices");
  expect_field(PlanOptions(unet_preset("unet-small"), {100, 100}, 4, 0), "device_memory");
  EXPECT_NO_THROW(example().validate());
}

}  // namespace
}  // namespace tessera::parallel
