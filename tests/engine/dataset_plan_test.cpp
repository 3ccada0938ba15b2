// `tessera plan --dataset` (engine/dataset_plan.hpp): three generated MSD datasets — isotropic,
// anisotropic (thick slices), and one whose median shape does not fit the memory given — and
// the chosen spacing, patch and pooling against what nnU-Net's rules give by hand, computed
// here from the rules and the generated geometry; the fingerprint's class shares and
// foreground intensities against the voxels written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"
#include "tessera/engine/auto_train.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/dataset_plan.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::engine {
namespace {

namespace fs = std::filesystem;

struct GeneratedCase {
  Index extent;                 // (z, y, x)
  std::vector<double> spacing;  // (z, y, x)
};

// An MSD v1 folder: each case a box of class 1 (intensity 100) and a smaller box of class 2
// (200) on background 0; counts what it wrote.
struct GeneratedDataset {
  fs::path root;
  int64_t voxels[3] = {0, 0, 0};

  GeneratedDataset(const std::string& name, const std::vector<GeneratedCase>& cases)
      : root(fs::temp_directory_path() / ("tessera_plan_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(root);
    fs::create_directories(root / "imagesTr");
    fs::create_directories(root / "labelsTr");
    nlohmann::json training = nlohmann::json::array();
    for (size_t k = 0; k < cases.size(); ++k) {
      const std::string id = name + "_" + std::to_string(k) + ".nii.gz";
      write_case(cases[k], (root / "imagesTr" / id).string(), (root / "labelsTr" / id).string());
      training.push_back({{"image", "./imagesTr/" + id}, {"label", "./labelsTr/" + id}});
    }
    nlohmann::json j = {{"name", name},
                        {"modality", {{"0", "CT"}}},
                        {"labels", {{"0", "background"}, {"1", "organ"}, {"2", "lesion"}}},
                        {"training", training},
                        {"test", nlohmann::json::array()}};
    std::ofstream(root / "dataset.json") << j.dump();
  }
  ~GeneratedDataset() { fs::remove_all(root); }

  void write_case(const GeneratedCase& c, const std::string& image, const std::string& labels) {
    const Index& e = c.extent;
    std::vector<float> im, lab;
    for (int64_t z = 0; z < e[0]; ++z)
      for (int64_t y = 0; y < e[1]; ++y)
        for (int64_t x = 0; x < e[2]; ++x) {
          const bool organ = z >= e[0] / 4 && z < 3 * e[0] / 4 && y >= e[1] / 4 && y < 3 * e[1] / 4 && x >= e[2] / 4 &&
                             x < 3 * e[2] / 4;
          const bool lesion = organ && z < e[0] / 2 && y < e[1] / 2 && x < e[2] / 2;
          const int cls = lesion ? 2 : organ ? 1 : 0;
          ++voxels[cls];
          lab.push_back(float(cls));
          im.push_back(100.f * float(cls));
        }
    Georeference g;
    g.spacing = {c.spacing[2], c.spacing[1], c.spacing[0]};  // ITK order (x, y, z)
    g.origin = {0, 0, 0};
    g.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    io::write_volume(image, e, g, im, /*as_int16=*/false);
    io::write_volume(labels, e, g, lab, /*as_int16=*/false);
  }
};

// nnU-Net's rule for a side: pool while the side halves evenly and stays >= 8 (a bottleneck
// of 4–8 voxels); a side off that grid is first rounded up to a multiple of
// 2^floor(log2(side / 4)).
int64_t side_on_grid(double side) {
  int64_t step = 1;
  while (8 * step <= side) step *= 2;
  return int64_t(std::ceil(side / double(step))) * step;
}
int pools_of(int64_t side) {
  int p = 0;
  while (side % (int64_t{2} << p) == 0 && side / (int64_t{2} << p) >= 4) ++p;
  return p;
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

PlanResources memory(int64_t bytes) { return PlanResources{1, bytes, "test"}; }

TEST(DatasetPlan, IsotropicDatasetTrainsItsMedianShapeAtItsMedianSpacing) {
  const std::vector<GeneratedCase> cases{{{36, 48, 60}, {1.0, 0.8, 0.8}},
                                         {{40, 50, 64}, {1.2, 0.9, 0.9}},
                                         {{44, 52, 70}, {1.1, 0.7, 0.7}}};
  GeneratedDataset d("iso", cases);
  const DatasetFingerprint f = fingerprint_dataset(d.root.string());
  ASSERT_EQ(f.cases.size(), 3u);
  EXPECT_EQ(f.cases[1].extent, (Index{40, 50, 64}));
  EXPECT_NEAR(f.cases[1].spacing[0], 1.2, 1e-6);
  const double all = double(d.voxels[0] + d.voxels[1] + d.voxels[2]);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(f.class_fractions[size_t(k)], double(d.voxels[k]) / all, 1e-12);
  // Foreground: only 100s and 200s, so the clipped mean is their voxel-weighted mean.
  EXPECT_NEAR(f.fg_mean, (100.0 * double(d.voxels[1]) + 200.0 * double(d.voxels[2])) / double(d.voxels[1] + d.voxels[2]),
              1e-3);
  EXPECT_DOUBLE_EQ(f.fg_low, 100);
  EXPECT_DOUBLE_EQ(f.fg_high, 200);

  const TrainingPlan p = plan_training(f, memory(int64_t{16} << 30));
  const std::vector<double> spacing{1.1, 0.8, 0.8};  // the medians; no axis is 3x another
  for (size_t a = 0; a < 3; ++a) EXPECT_NEAR(p.spacing[a], spacing[a], 1e-6);
  for (size_t a = 0; a < 3; ++a) {
    std::vector<double> at_target;
    for (const GeneratedCase& c : cases) at_target.push_back(double(c.extent[a]) * c.spacing[a] / spacing[a]);
    const int64_t shape = std::llround(median(at_target));
    EXPECT_EQ(p.median_shape[a], shape) << a;
    EXPECT_EQ(p.patch[a], side_on_grid(double(shape))) << a;  // 16 GiB: the whole median shape
    EXPECT_EQ(p.pooling[size_t(a)], pools_of(p.patch[a])) << a;
    const int64_t bottleneck = p.patch[a] >> p.pooling[size_t(a)];
    EXPECT_GE(bottleneck, 4);
    EXPECT_LT(bottleneck, 8);
  }
  EXPECT_EQ(p.levels, 1 + *std::min_element(p.pooling.begin(), p.pooling.end()));
  EXPECT_GE(p.batch, 2);
}

TEST(DatasetPlan, ThickSlicesTakeTheTenthPercentileOfTheirSpacing) {
  std::vector<GeneratedCase> cases;
  for (double z : {5.0, 4.0, 6.0, 3.0, 5.0}) cases.push_back({{20, 96, 96}, {z, 0.8, 0.8}});
  GeneratedDataset d("aniso", cases);
  const TrainingPlan p = plan_training(fingerprint_dataset(d.root.string()), memory(int64_t{16} << 30));
  // z: 5 mm (median) > 3 × 0.8 mm, and 20 slices × 3 < 96 voxels across: anisotropic. The
  // 10th percentile of {3, 4, 5, 5, 6}: 3 + 0.4 × (4 − 3) = 3.4 mm (numpy's interpolation).
  EXPECT_NEAR(p.spacing[0], 3.4, 1e-6);
  EXPECT_NEAR(p.spacing[1], 0.8, 1e-6);
  std::vector<double> slices;
  for (const GeneratedCase& c : cases) slices.push_back(20 * c.spacing[0] / 3.4);
  const int64_t depth = std::llround(median(slices));  // 100 / 3.4 = 29.4 → 29
  EXPECT_EQ(p.median_shape, (Index{depth, 96, 96}));
  EXPECT_EQ(p.patch, (Index{side_on_grid(double(depth)), 96, 96}));  // 29 → 32 on the grid of 4
  EXPECT_EQ(p.pooling, (std::vector<int>{pools_of(p.patch[0]), pools_of(96), pools_of(96)}));
}

TEST(DatasetPlan, PatchShrinksAGridStepPerAxisUntilABatchOfTwoFits) {
  std::vector<GeneratedCase> cases(3, GeneratedCase{{64, 64, 64}, {2.0, 2.0, 2.0}});
  GeneratedDataset d("small", cases);
  const DatasetFingerprint f = fingerprint_dataset(d.root.string());
  // The 64³ median shape (grid step 16) shrinks one axis at a time, the one largest relative
  // to the shape (ties: the first): 48×64×64, 48×48×64, then 48³. Memory for exactly 48³ at
  // batch 2 stops it there.
  const Index cube{48, 48, 48};
  const int64_t fits = plan_training_bytes(cube, 1 + pools_of(48), 3, 2);
  EXPECT_GT(plan_training_bytes({48, 48, 64}, 1 + pools_of(48), 3, 2), fits);
  const TrainingPlan p = plan_training(f, memory(fits));
  EXPECT_EQ(p.spacing, (std::vector<double>{2.0, 2.0, 2.0}));
  EXPECT_EQ(p.patch, cube);
  EXPECT_EQ(p.pooling, (std::vector<int>{3, 3, 3}));  // 48 → 24 → 12 → 6
  EXPECT_EQ(p.levels, 4);
  EXPECT_EQ(p.batch, 2);
  EXPECT_LE(p.predicted_bytes, fits);
  // Far too little memory: refused, naming the flag to raise.
  try {
    plan_training(f, memory(1 << 16));  // less than the smallest network's weights and optimiser state
    ADD_FAILURE() << "64 KiB planned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--device-memory"), std::string::npos) << e.what();
  }
}

// --auto (auto_train.hpp): the plan's keys set where nothing else set them; a key the file or
// a flag gives keeps its value, and the choice says what gave it.
TEST(AutoPlan, PlanSetsKeysTheFileAndFlagsLeave) {
  const std::vector<GeneratedCase> cases(3, GeneratedCase{{32, 32, 32}, {3.0, 1.0, 1.0}});
  GeneratedDataset d("auto", cases);
  RunConfig c;
  c.data.dataset = d.root.string();
  c.train.tile = 24;   // as if the file said train.tile: 24
  c.train.batch = 1;   // as if a flag said --batch 1
  AutoRequest r;
  r.device_memory_gib = 16;
  const AutoPlan a = apply_auto_plan(c, "", {"train", "train.tile"}, {"train.batch"}, r);
  const TrainingPlan p = plan_training(fingerprint_dataset(d.root.string()), plan_resources(1, 16));
  EXPECT_EQ(c.train.tile, 24);
  EXPECT_EQ(c.train.batch, 1);
  EXPECT_EQ(c.model.options.levels, p.levels);
  EXPECT_EQ(c.model.options.norm, Norm::kInstance);
  EXPECT_EQ(c.model.options.padding, Padding::kSame);
  EXPECT_EQ(c.train.optimizer.kind, OptimizerKind::kSgd);
  EXPECT_DOUBLE_EQ(c.train.augmentation.rotation, 30);
  EXPECT_DOUBLE_EQ(c.train.augmentation.elastic, 0);  // no budget of an hour
  // The plan's spacing (z, y, x) as data.resample.spacing (x, y, z).
  EXPECT_EQ(c.data.resample.spacing, (std::vector<double>{p.spacing[2], p.spacing[1], p.spacing[0]}));
  const auto choice = [&](const std::string& key) {
    for (const AutoChoice& ch : a.choices)
      if (ch.key == key) return ch;
    ADD_FAILURE() << "no choice " << key;
    return AutoChoice{};
  };
  EXPECT_EQ(choice("train.tile").given_by, "the config file");
  EXPECT_EQ(choice("train.tile").value, std::to_string(*std::min_element(p.patch.begin(), p.patch.end())));
  EXPECT_EQ(choice("train.batch").given_by, "a flag");
  EXPECT_EQ(choice("model.norm").given_by, "");
  EXPECT_FALSE(choice("model.norm").why.empty());
  EXPECT_EQ(a.time_budget_s, 0);
  // A budget of an hour turns elastic deformation on and leaves train.steps to be measured.
  RunConfig longer;
  longer.data.dataset = d.root.string();
  r.time_budget_s = 3600;
  EXPECT_EQ(apply_auto_plan(longer, "", {}, {}, r).time_budget_s, 3600);
  EXPECT_GT(longer.train.augmentation.elastic, 0);
  // A preset named by the file keeps the network, and the patch and batch sized for the plan's
  // own U-Net are not forced on it.
  RunConfig named;
  named.data.dataset = d.root.string();
  named.train.tile = 20;
  named.train.batch = 3;
  r.time_budget_s = 0;
  apply_auto_plan(named, "", {"model", "model.preset"}, {}, r);
  EXPECT_EQ(named.train.tile, 20);
  EXPECT_EQ(named.train.batch, 3);
}

TEST(AutoPlan, ConfigFileKeysAreTheDottedKeysTheFileSets) {
  const ConfigFile f = ConfigFile::parse(
      "run_dir: run\ntrain:\n  tile: 64\ndata:\n  resample:\n    spacing: [1, 1, 3]\n  pairs:\n"
      "    - {image: a.tif, labels: b.tif}\n",
      "c.yaml");
  EXPECT_EQ(config_file_keys(f), (std::set<std::string>{"run_dir", "train", "train.tile", "data", "data.resample",
                                                        "data.resample.spacing", "data.pairs"}));
}

// --time-budget's shape rule on a 3-D plan of 80³ tiles, 5 levels, 32 filters, batch 4, for a
// median case of 82 voxels across: the rate is set so that a chosen shape just affords 1000
// steps, and the rule must give back batch, patch to half the case (48), width, patch — in
// that order — and stop there.
UNetOptions budget_model() {
  return UNetOptions().with_dims(3).with_in_channels(1).with_classes(3).with_padding(Padding::kSame).with_norm(Norm::kInstance);
}

// Seconds that afford `steps` steps of `s` at 1 ns per FLOP.
double seconds_for(const StepShape& s, double steps) { return steps * 1e-9 * step_flops(budget_model(), s); }

bool same(const StepShape& a, const StepShape& b) {
  return a.tile == b.tile && a.levels == b.levels && a.base_filters == b.base_filters && a.batch == b.batch;
}
std::string text(const StepShape& s) {
  return std::to_string(s.tile) + "/" + std::to_string(s.levels) + "/" + std::to_string(s.base_filters) + "/" +
         std::to_string(s.batch);
}

TEST(AutoPlan, TimeBudgetGivesBackBatchPatchWidthPatchInThatOrder) {
  const StepShape planned{80, 5, 32, 4};
  const auto fit = [&](const StepShape& afforded, double margin, const std::set<std::string>& fixed = {}) {
    return fit_step_shape(planned, fixed, budget_model(), 82, 1e-9, seconds_for(afforded, 1000 * margin));
  };
  // Just enough for each stage's result: the rule stops there.
  for (const StepShape& want : {StepShape{80, 5, 32, 2}, StepShape{64, 5, 32, 2}, StepShape{48, 4, 32, 2},
                                StepShape{48, 4, 16, 2}, StepShape{40, 4, 16, 2}, StepShape{32, 4, 16, 2}}) {
    const ShapeFit f = fit(want, 1.001);
    EXPECT_TRUE(same(f.shape, want)) << "got " << text(f.shape) << ", want " << text(want);
    EXPECT_GE(f.predicted_steps, 1000);
  }
  EXPECT_TRUE(same(fit(planned, 1.001).shape, planned));  // the plan fits: nothing given back
  EXPECT_NE(fit(planned, 1.001).why.find("nothing given back"), std::string::npos);
  // Not even the smallest affords 1000: the smallest, said so.
  const ShapeFit short_fit = fit(StepShape{32, 4, 16, 2}, 0.5);
  EXPECT_TRUE(same(short_fit.shape, (StepShape{32, 4, 16, 2}))) << text(short_fit.shape);
  EXPECT_NEAR(short_fit.predicted_steps, 500, 1);
  EXPECT_NE(short_fit.why.find("fewer than wanted"), std::string::npos) << short_fit.why;
  EXPECT_TRUE(same(smallest_step_shape(planned, {}), short_fit.shape));
  // Keys the file or a flag gave stay: a given tile leaves width and batch to give back.
  const ShapeFit tile_given = fit(StepShape{32, 4, 16, 2}, 0.5, {"train.tile", "model.levels"});
  EXPECT_TRUE(same(tile_given.shape, (StepShape{80, 5, 16, 2}))) << text(tile_given.shape);
  EXPECT_TRUE(same(smallest_step_shape(planned, {"train.tile", "model.levels"}), (StepShape{80, 5, 16, 2})));
}

TEST(AutoPlan, TimeBudgetReadsDurations) {
  EXPECT_DOUBLE_EQ(parse_time_budget("30m"), 1800);
  EXPECT_DOUBLE_EQ(parse_time_budget("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(parse_time_budget("90s"), 90);
  EXPECT_DOUBLE_EQ(parse_time_budget("45"), 45);
  for (const char* bad : {"", "5x", "m", "0", "1h-2m", "1.2.3h", "1h30"}) EXPECT_THROW(parse_time_budget(bad), Error) << bad;
}

}  // namespace
}  // namespace tessera::engine
