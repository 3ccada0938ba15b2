// The trainer: resume after a crash continues the same run, schedules follow their formulas,
// curriculum, checkpoint retention, validation and early stopping.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include <ATen/autocast_mode.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "memory_image.hpp"
#include "../../core/src/tile_sampler.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/torch_compat.hpp"
#include "tessera/core/trainer.hpp"
#include "tessera/run/run_writer.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using testing::MemoryImage;

// Two bands with structure, three classes from a formula the network can learn.
struct Scene {
  MemoryImage image{Index{96, 96}, 2, [](int c, const Index& at) {
                      const float y = float(at[0]), x = float(at[1]);
                      return c == 0 ? std::sin(x / 7.f) + 0.1f * std::cos(y / 3.f) : std::cos((x + y) / 11.f);
                    }};
  MemoryImage labels{Index{96, 96}, 1, [](int, const Index& at) {
                       const float y = float(at[0]), x = float(at[1]);
                       return std::sin(x / 7.f) > 0.3f ? 1.f : (std::cos((x + y) / 11.f) > 0.5f ? 2.f : 0.f);
                     }};
};

std::string fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("tessera-trainer-test-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

TrainOptions options(const std::string& run_dir) {
  TrainOptions o;
  o.tile = 16;
  o.batch = 2;
  o.accumulate = 2;
  o.steps = 12;
  o.steps_per_epoch = 4;
  o.optimizer.learning_rate = 3e-3;
  o.optimizer.schedule = ScheduleKind::kCosine;
  o.optimizer.warmup_steps = 2;
  o.grad_clip = 1.0;
  o.foreground_fraction = 0.5;
  o.seed = 11;
  o.checkpoint_every = 3;
  o.progress = false;
  o.run_dir = run_dir;
  return o;
}

CheckpointMeta meta_for(const UNet& net) {
  CheckpointMeta meta;
  meta.model = net->options();
  meta.norm = {{0.f, 0.f}, {1.f, 1.f}};
  meta.class_names = {"background", "a", "b"};
  return meta;
}

UNetOptions tiny() { return unet_preset("unet-tiny").with_in_channels(2).with_classes(3).with_base_filters(4); }

// step → loss from metrics.jsonl (step lines only).
std::map<int64_t, double> losses(const std::string& run_dir) {
  std::map<int64_t, double> out;
  for (const StepMetrics& m : read_metrics(RunLayout(run_dir).metrics()).steps)
    if (m.loss) out[m.step] = *m.loss;
  return out;
}

// train() with its reports written into options.run_dir, as `tessera train` does.
TrainReport train_into_run(UNet& net, const std::vector<TrainingPair>& pairs, const TrainOptions& o,
                           TrainHooks* hooks = nullptr, const std::vector<TrainingPair>& validation = {}) {
  RunWriter writer(o.run_dir);
  return train(net, pairs, o, meta_for(net), hooks, validation, &writer);
}

// Hooks of a process that dies after a given step (before that step's checkpoint).
class CrashAfter final : public TrainHooks {
 public:
  explicit CrashAfter(int64_t step) : step_(step) {}
  void on_step(int64_t step, double) override {
    if (step == step_) throw std::runtime_error("simulated crash");
  }

 private:
  int64_t step_;
};

TEST(Trainer, ResumedRunHasTheLossesOfTheUninterruptedRun) {
  Scene s;
  const std::vector<TrainingPair> pairs{{&s.image, &s.labels, Box{{0, 0}, {96, 64}}}};
  const std::vector<TrainingPair> validation{{&s.image, &s.labels, Box{{0, 64}, {96, 32}}}};

  const std::string whole = fresh_dir("whole");
  torch::manual_seed(1);
  UNet a(tiny());
  const TrainReport ra = train_into_run(a, pairs, options(whole), nullptr, validation);
  EXPECT_EQ(ra.last_step, 12);

  const std::string killed = fresh_dir("killed");
  torch::manual_seed(1);
  UNet b(tiny());
  CrashAfter crash(8);  // last checkpoint: step 6, mid-epoch 2; steps 7 and 8 are redone
  EXPECT_THROW(train_into_run(b, pairs, options(killed), &crash, validation), std::runtime_error);
  EXPECT_EQ(read_checkpoint_meta(killed + "/checkpoints/last.pt").step, 6);
  EXPECT_EQ(losses(killed).size(), 7u);  // died before writing step 8

  torch::manual_seed(999);  // a different initialisation: everything must come from the checkpoint
  UNet c(tiny());
  TrainOptions o = options(killed);
  o.resume = killed + "/checkpoints/last.pt";
  const TrainReport rc = train_into_run(c, pairs, o, nullptr, validation);
  EXPECT_EQ(rc.steps, 6);
  EXPECT_EQ(rc.last_step, 12);

  const auto expected = losses(whole), got = losses(killed);
  ASSERT_EQ(expected.size(), 12u);
  ASSERT_EQ(got.size(), 12u);
  for (const auto& [step, loss] : expected) EXPECT_EQ(got.at(step), loss) << "step " << step;
  auto pa = a->parameters(), pc = c->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pc[i])) << "parameter " << i;
  EXPECT_DOUBLE_EQ(rc.best_validation, ra.best_validation);
}

TEST(Trainer, SchedulesFollowTheirFormulas) {
  OptimizerOptions o;
  o.learning_rate = 0.1;
  o.warmup_steps = 10;
  EXPECT_DOUBLE_EQ(learning_rate_at(o, 1, 110), 0.01);
  EXPECT_DOUBLE_EQ(learning_rate_at(o, 5, 110), 0.05);
  EXPECT_DOUBLE_EQ(learning_rate_at(o, 50, 110), 0.1);
  o.schedule = ScheduleKind::kCosine;
  EXPECT_NEAR(learning_rate_at(o, 60, 110), 0.05, 1e-12);  // half way through the 100 steps after warm-up
  EXPECT_NEAR(learning_rate_at(o, 35, 110), 0.1 * 0.5 * (1 + std::cos(std::numbers::pi * 0.25)), 1e-12);
  EXPECT_NEAR(learning_rate_at(o, 110, 110), 0.0, 1e-12);
  o.schedule = ScheduleKind::kPolynomial;
  o.power = 2;
  EXPECT_NEAR(learning_rate_at(o, 60, 110), 0.1 * 0.25, 1e-12);
  o.schedule = ScheduleKind::kStep;
  o.step_size = 30;
  o.gamma = 0.5;
  EXPECT_NEAR(learning_rate_at(o, 39, 110), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate_at(o, 40, 110), 0.05, 1e-12);
  EXPECT_NEAR(learning_rate_at(o, 100, 110), 0.0125, 1e-12);
}

TEST(Trainer, EveryOptimiserLowersTheLoss) {
  Scene s;
  const std::vector<TrainingPair> pairs{{&s.image, &s.labels, Box{{0, 0}, {96, 96}}}};
  for (const char* name : {"adam", "adamw", "sgd", "rmsprop"}) {
    torch::manual_seed(2);
    UNet net(tiny());
    TrainOptions o = options(fresh_dir(std::string("opt-") + name));
    o.optimizer.kind = parse_optimizer_kind(name);
    o.optimizer.schedule = ScheduleKind::kConstant;
    o.optimizer.learning_rate = std::string(name) == "sgd" ? 0.05 : 3e-3;
    o.steps = 40;
    o.steps_per_epoch = 40;
    o.grad_clip = 0;
    train_into_run(net, pairs, o);
    const auto l = losses(o.run_dir);
    double first = 0, end = 0;
    for (int64_t k = 1; k <= 5; ++k) first += l.at(k) / 5;
    for (int64_t k = 36; k <= 40; ++k) end += l.at(k) / 5;
    EXPECT_LT(end, 0.9 * first) << name;
  }
}

// Mixed precision (train.precision bf16): the convolutions run in bfloat16 under autocast
// (their output type says so), the parameters stay fp32, the losses follow fp32's within 2 %
// and fall as much; the result differs from fp32 (the setting is not a no-op). Unknown
// precisions are refused naming the key.
TEST(Trainer, MixedPrecisionBf16FollowsFp32) {
  Scene s;
  const std::vector<TrainingPair> pairs{{&s.image, &s.labels, Box{{0, 0}, {96, 96}}}};
  auto run = [&](const std::string& precision) {
    torch::manual_seed(2);
    UNet net(tiny());
    TrainOptions o = options(fresh_dir("precision-" + precision));
    o.precision = precision;
    o.optimizer.schedule = ScheduleKind::kConstant;
    o.steps = 30;
    o.steps_per_epoch = 30;
    o.grad_clip = 0;
    train_into_run(net, pairs, o);
    for (const auto& p : net->parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat32);
    return std::pair{losses(o.run_dir), net};
  };
  const auto fp32 = run("fp32").first;
  auto [bf16, net16] = run("bf16");
  ASSERT_EQ(fp32.size(), bf16.size());
  double worst = 0;
  for (const auto& [step, loss] : fp32) worst = std::max(worst, std::abs(bf16.at(step) - loss) / loss);
  EXPECT_LT(worst, 0.02);
  EXPECT_GT(worst, 0.0) << "bf16 gave fp32's losses bit for bit: autocast did not reach the convolutions";
  EXPECT_LT(bf16.rbegin()->second, 0.9 * bf16.begin()->second);

  torch::NoGradGuard no_grad;
  torch_compat::set_autocast_enabled(c10::DeviceType::CPU, true);
  torch_compat::set_autocast_dtype(c10::DeviceType::CPU, at::kBFloat16);
  const torch::Tensor y = net16->forward(torch::randn({1, 2, 108, 108}));
  torch_compat::set_autocast_enabled(c10::DeviceType::CPU, false);
  at::autocast::clear_cache();
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);

  TrainOptions bad = options(fresh_dir("precision-bad"));
  bad.precision = "fp8";
  try {
    bad.validate(tiny());
    FAIL() << "fp8 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.precision"), std::string::npos) << e.what();
  }
}

TEST(Trainer, CurriculumKeepsAndBestAndEarlyStopping) {
  Scene s;
  const std::vector<TrainingPair> pairs{{&s.image, &s.labels, Box{{0, 0}, {96, 64}}}};
  const std::vector<TrainingPair> validation{{&s.image, &s.labels, Box{{0, 64}, {96, 32}}}};
  torch::manual_seed(3);
  UNet net(tiny());
  TrainOptions o = options(fresh_dir("curriculum"));
  o.curriculum = {{0, 16}, {1, 32}};
  o.keep_last = 2;
  o.checkpoint_every = 2;
  o.optimizer.learning_rate = 1e-12;  // nothing improves after the first epoch
  o.optimizer.warmup_steps = 0;
  o.early_stopping = 2;
  o.steps = 40;
  const TrainReport r = train_into_run(net, pairs, o, nullptr, validation);
  EXPECT_TRUE(r.stopped_early);
  EXPECT_EQ(r.last_step, 12);  // epoch 1 sets the best, epochs 2 and 3 do not beat it
  EXPECT_TRUE(fs::exists(r.best_checkpoint));
  EXPECT_EQ(read_checkpoint_meta(r.best_checkpoint).step, 4);
  int step_files = 0;
  for (const auto& e : fs::directory_iterator(fs::path(o.run_dir) / "checkpoints"))
    step_files += e.path().filename().string().rfind("step-", 0) == 0;
  EXPECT_EQ(step_files, 2);
  std::ifstream in(fs::path(o.run_dir) / "metrics.jsonl");
  int validations = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("val_mean_dice")) {
      ++validations;
      EXPECT_EQ(j["val_dice"].size(), 3u);
    } else {
      EXPECT_EQ(j["tile"].get<int64_t>(), j["step"].get<int64_t>() <= 4 ? 16 : 32);
    }
  }
  EXPECT_EQ(validations, 3);
}

// The seam between core and the run directory: the real trainer's reports, written by the
// real RunWriter, read back by the real readers (RunLayout listings, the checkpoint loader,
// the metrics codec) — what `tessera train`, `--resume auto` and the viewer rely on.
TEST(Trainer, RunWriterOutputIsWhatTheReadersRead) {
  Scene s;
  const std::vector<TrainingPair> pairs{{&s.image, &s.labels, Box{{0, 0}, {96, 64}}}};
  const std::vector<TrainingPair> validation{{&s.image, &s.labels, Box{{0, 64}, {96, 32}}}};
  torch::manual_seed(4);
  UNet net(tiny());
  TrainOptions o = options(fresh_dir("seam"));
  o.steps = 6;
  o.steps_per_epoch = 3;
  o.checkpoint_every = 2;
  o.keep_last = 2;
  const TrainReport r = train_into_run(net, pairs, o, nullptr, validation);
  const RunLayout run(o.run_dir);

  // Checkpoints at steps 2, 3 (first validation: a new best), 4 and 6; the newest two step files kept.
  const std::vector<std::string> expected_files{run.best_checkpoint(), run.last_checkpoint(), run.step_checkpoint(4),
                                                run.step_checkpoint(6)};
  EXPECT_EQ(run.checkpoints(), expected_files);
  EXPECT_EQ(run.step_checkpoints(), (std::vector<std::string>{run.step_checkpoint(4), run.step_checkpoint(6)}));
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(run.checkpoints_dir())) ++entries;
  EXPECT_EQ(entries, 4) << "temporaries left in " << run.checkpoints_dir();
  EXPECT_EQ(r.checkpoint, run.last_checkpoint());

  LoadedCheckpoint last = load_checkpoint(run.last_checkpoint());
  EXPECT_EQ(last.meta.step, 6);
  EXPECT_EQ(last.meta.epoch, 1);
  EXPECT_EQ(last.meta.class_names, meta_for(net).class_names);
  EXPECT_FALSE(last.meta.trainer_state.empty());
  auto trained = net->named_parameters(), loaded = last.net->named_parameters();
  for (const auto& p : trained) EXPECT_TRUE(torch::equal(p.value(), loaded[p.key()])) << p.key();
  EXPECT_EQ(read_checkpoint_meta(run.step_checkpoint(4)).step, 4);
  ASSERT_FALSE(r.best_checkpoint.empty());
  EXPECT_EQ(r.best_checkpoint, run.best_checkpoint());
  const int64_t best_step = read_checkpoint_meta(run.best_checkpoint()).step;
  EXPECT_TRUE(best_step == 3 || best_step == 6) << best_step;

  // metrics.jsonl: six step lines, a validation line after steps 3 and 6, in that order.
  const MetricsLog log = read_metrics(run.metrics());
  ASSERT_EQ(log.steps.size(), 6u);
  for (size_t i = 0; i < log.steps.size(); ++i) {
    const StepMetrics& m = log.steps[i];
    EXPECT_EQ(m.step, int64_t(i) + 1);
    EXPECT_EQ(m.epoch, int64_t(i) / 3);
    ASSERT_TRUE(m.loss.has_value());
    EXPECT_TRUE(std::isfinite(*m.loss));
    EXPECT_EQ(m.global_batch, 4);  // batch 2 × accumulate 2
    EXPECT_EQ(m.tile, 16);
    EXPECT_GE(m.lr, 0);  // cosine: 0 at the last step
    EXPECT_TRUE(m.grad_norm.has_value());  // clipping is on
  }
  ASSERT_EQ(log.validations.size(), 2u);
  EXPECT_EQ(log.validations[0].step, 3);
  EXPECT_EQ(log.validations[1].step, 6);
  EXPECT_EQ(log.validations[1].val_dice.size(), 3u);
  EXPECT_DOUBLE_EQ(log.validations[1].best, r.best_validation);
  std::vector<int64_t> order;  // the step of each line, validation lines negative
  std::ifstream in(run.metrics());
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    order.push_back(j.contains("val_mean_dice") ? -j["step"].get<int64_t>() : j["step"].get<int64_t>());
  }
  EXPECT_EQ(order, (std::vector<int64_t>{1, 2, 3, -3, 4, 5, 6, -6}));
}

// core computes and reports; without an observer no file appears.
TEST(Trainer, WithoutAnObserverNothingIsWritten) {
  Scene s;
  const std::vector<TrainingPair> pairs{{&s.image, &s.labels, Box{{0, 0}, {96, 96}}}};
  torch::manual_seed(5);
  UNet net(tiny());
  TrainOptions o = options(fresh_dir("silent") + "/run");
  o.steps = 3;
  const TrainReport r = train(net, pairs, o, meta_for(net));
  EXPECT_EQ(r.last_step, 3);
  EXPECT_FALSE(fs::exists(o.run_dir));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Geometric augmentation moves image and labels together: with labels a pointwise function
// of band 0, every augmented tile still satisfies it; intensity changes leave labels alone.
TEST(Trainer, AugmentationTransformsImageAndLabelsAlike) {
  MemoryImage image{Index{64, 64}, 1, [](int, const Index& at) {
                      return std::sin(0.37f * float(at[0]) * float(at[0]) + 0.11f * float(at[1]));
                    }};
  MemoryImage labels{Index{64, 64}, 1, [&](int, const Index& at) {
                       return std::sin(0.37f * float(at[0]) * float(at[0]) + 0.11f * float(at[1])) > 0.2f ? 1.f : 0.f;
                     }};
  const std::vector<TrainingPair> pairs{{&image, &labels, Box{{0, 0}, {64, 64}}}};
  const UNetOptions model = unet_preset("unet-tiny").with_in_channels(1).with_classes(2).with_padding(Padding::kSame);
  TrainOptions o;
  o.tile = 16;
  o.batch = 8;
  o.seed = 5;
  o.augmentation.rotate90 = true;
  detail::TileSampler rotating(pairs, model, o, {{0.f}, {1.f}}, 0, 1);
  o.augmentation.rotate90 = false;
  detail::TileSampler plain(pairs, model, o, {{0.f}, {1.f}}, 0, 1);
  bool differs = false;
  for (int k = 0; k < 4; ++k) {
    const detail::Sample a = rotating.load(rotating.plan(16));
    EXPECT_TRUE(torch::equal(a.target, (a.input.select(1, 0) > 0.2f).to(torch::kInt64)));
    const detail::Sample b = plain.load(plain.plan(16));
    EXPECT_TRUE(torch::equal(b.target, (b.input.select(1, 0) > 0.2f).to(torch::kInt64)));
    differs = differs || !torch::equal(a.input, b.input);
  }
  EXPECT_TRUE(differs) << "rotation never changed a tile";

  o.augmentation.intensity_scale = 0.2;
  o.augmentation.intensity_shift = 0.5;
  o.augmentation.gaussian_noise = 0.1;
  detail::TileSampler noisy(pairs, model, o, {{0.f}, {1.f}}, 0, 1);
  detail::TileSampler same_seed(pairs, model, o, {{0.f}, {1.f}}, 0, 1);
  const detail::Sample n = noisy.load(noisy.plan(16)), m = same_seed.load(same_seed.plan(16));
  EXPECT_TRUE(torch::equal(n.input, m.input)) << "augmentation must be reproducible from the seed";
  EXPECT_GT((n.target == (n.input.select(1, 0) > 0.2f).to(torch::kInt64)).logical_not().sum().item<int64_t>(), 0)
      << "intensity changes must not move labels (so labels no longer follow the changed image)";
}

}  // namespace
}  // namespace tessera
