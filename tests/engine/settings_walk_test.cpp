// Every key of the resolved config, walked through every training mode: honoured or refused.
//
// For each mode (data parallel on one rank and on two, pipeline stages, spatial blocks, a
// Domain Separation Network) a small baseline run trains a few steps on a 64 x 64 scene with
// validation, step checkpoints and the mode's own settings. Then, for every declared key of
// RunConfig (engine/run_config.hpp), the same run with only that key changed, through the real
// reader (the baseline's YAML with the key's value replaced) and the real TrainJob:
//   - a key the engine's table refuses in that mode (train_settings.hpp) must stop the run
//     with an error naming the key;
//   - any other key must change what the run writes: the per-step losses, learning rates,
//     tiles and gradient communication of metrics.jsonl, the validation lines, the checkpoint
//     files kept, or the weights and description of the last checkpoint.
// A key that does neither is read on one path and silently ignored: the test names it.
// The few keys whose effect is exact by design (reading ahead, a schedule that gives the same
// sums) or that one replica cannot show are listed below with the reason, and for them the
// test checks the claim: the run writes exactly what the baseline wrote.
//
// Runs under mpirun (tests/CMakeLists.txt): -np 1 walks data parallelism on one rank, -np 2
// the other modes. Rank 0 checks; every rank runs every TrainJob (they are collective).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <gdal_priv.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/engine/train_job.hpp"
#include "tessera/engine/train_settings.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/run/run_writer.hpp"

namespace tessera::engine {
namespace {

namespace fs = std::filesystem;

// ---- inputs --------------------------------------------------------------------------------

// A 64 x 64 scene whose classes the bands show (band 0: the class plus noise; bands 1, 2:
// the coordinates), or its labels. `shift`: a target domain's brighter sensor.
void write_scene(const fs::path& path, bool labels, double shift, uint32_t seed) {
  GDALAllRegister();
  const int n = 64, bands = labels ? 1 : 3;
  GDALDriver* driver = GetGDALDriverManager()->GetDriverByName("GTiff");
  GDALDataset* ds = driver->Create(path.c_str(), n, n, bands, labels ? GDT_Byte : GDT_Float32, nullptr);
  ASSERT_NE(ds, nullptr) << path;
  double transform[6] = {500000, 10, 0, 4000000, 0, -10};
  ds->SetGeoTransform(transform);
  std::vector<float> image(size_t(n) * n);
  std::vector<uint8_t> classes(size_t(n) * n);
  uint32_t state = seed;
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) {
      state = state * 1664525u + 1013904223u;
      const int k = ((x / 12) + (y / 20)) % 3;
      classes[size_t(y) * n + x] = uint8_t(k);
      image[size_t(y) * n + x] = float(k + shift + 0.3 * (double(state >> 8) / double(1 << 24) - 0.5));
    }
  CPLErr err = CE_None;
  if (labels) {
    err = ds->GetRasterBand(1)->RasterIO(GF_Write, 0, 0, n, n, classes.data(), n, n, GDT_Byte, 0, 0);
  } else {
    err = ds->GetRasterBand(1)->RasterIO(GF_Write, 0, 0, n, n, image.data(), n, n, GDT_Float32, 0, 0);
    for (int b = 0; b < 2 && err == CE_None; ++b) {
      for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x) image[size_t(y) * n + x] = float(b == 0 ? x : y) / float(n);
      err = ds->GetRasterBand(b + 2)->RasterIO(GF_Write, 0, 0, n, n, image.data(), n, n, GDT_Float32, 0, 0);
    }
  }
  GDALClose(ds);
  ASSERT_EQ(err, CE_None) << path;
}

// ---- the modes -----------------------------------------------------------------------------

const char* const kTrain =
    "train: {tile: 16, batch: 2, steps: 8, steps_per_epoch: 2, checkpoint_every: 2, keep_last: 2, seed: 3, "
    "learning_rate: 0.01}\n";

std::string baseline(const std::string& model, const std::string& parallel, bool dsn, const std::string& train_extra = "") {
  std::string train = kTrain;
  if (!train_extra.empty()) train.insert(train.rfind('}'), ", " + train_extra);
  const std::string data =
      dsn ? "data: {source: {pairs: [{image: WALKDIR/a.tif, labels: WALKDIR/a_labels.tif}]}, targets: [{images: [WALKDIR/b.tif]}], "
            "holdout: {fraction: 0.25}}\n"
          : "data: {pairs: [{image: WALKDIR/a.tif, labels: WALKDIR/a_labels.tif}], holdout: {fraction: 0.25}}\n";
  return "run_dir: WALKDIR/run\nmodel: {" + model + "}\n" + train + "parallel: {" + parallel + "}\n" + data;
}

const char* const kModel = "preset: unet-tiny, levels: 2, base_filters: 4, classes: 3, norm: batch";
// Pipelines and DSNs refuse batch norm (whole-batch statistics across stages or domains).
const char* const kGroupNormModel = "preset: unet-tiny, levels: 2, base_filters: 4, classes: 3, norm: group";

// ---- one run and what it wrote -------------------------------------------------------------

std::string number(double v) {
  char s[40];
  std::snprintf(s, sizeof s, "%.17g", v);
  return s;
}

// What a finished run wrote, without what varies between identical runs (times, rates).
std::string fingerprint(const fs::path& run_dir) {
  const RunLayout run(run_dir.string());
  std::ostringstream out;
  const MetricsLog log = read_metrics(run.metrics());
  for (const StepMetrics& m : log.steps) {
    out << "step " << m.step << " epoch " << m.epoch << " loss " << (m.loss ? number(*m.loss) : "none") << " lr "
        << number(m.lr) << " batch " << m.global_batch << " tile " << m.tile << " grad_norm "
        << (m.grad_norm ? number(*m.grad_norm) : "none");
    for (const auto& [name, v] : m.loss_terms) out << ' ' << name << ' ' << number(v);
    if (m.communication) out << " buckets " << m.communication->buckets << " overlapped " << m.communication->overlapped;
    out << '\n';
  }
  for (const ValidationMetrics& v : log.validations) {
    out << "validation " << v.step << ' ' << v.epoch << ' ' << number(v.val_mean_dice) << ' ' << number(v.best);
    for (const auto& d : v.val_dice) out << ' ' << (d ? number(*d) : "none");
    out << '\n';
  }
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(run.checkpoints_dir())) files.insert(e.path().filename().string());
  for (const std::string& f : files) out << "checkpoint " << f << '\n';
  const LoadedCheckpoint ck = load_checkpoint(run.last_checkpoint());
  nlohmann::json meta;
  to_json(meta, ck.meta);
  out << "meta " << meta.dump() << '\n';
  torch::NoGradGuard no_grad;
  for (const auto& p : ck.net->named_parameters())
    out << p.key() << ' ' << number(p.value().to(torch::kDouble).sum().item<double>()) << ' '
        << number(p.value().to(torch::kDouble).square().sum().item<double>()) << '\n';
  for (const auto& b : ck.net->named_buffers())
    out << b.key() << ' ' << number(b.value().to(torch::kDouble).sum().item<double>()) << '\n';
  return out.str();
}

// Sends this process's stdout and stderr (the runs' plans and reports) to a file while alive.
class Quiet {
 public:
  explicit Quiet(const fs::path& log) : out_(::dup(1)), err_(::dup(2)) {
    std::fflush(stdout);
    std::fflush(stderr);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~Quiet() {
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(out_, 1);
    ::dup2(err_, 2);
    ::close(out_);
    ::close(err_);
  }

 private:
  int out_, err_;
};

struct Outcome {
  bool refused = false;
  std::string error;        // when refused
  std::string fingerprint;  // rank 0, when it ran
};

// The run of `yaml` (WALKDIR replaced by the folder) in a fresh run directory.
Outcome run(const std::string& yaml, const fs::path& dir) {
  parallel::Communicator& world = parallel::world();
  std::string text = yaml;
  const std::string placeholder = "WALKDIR";
  for (size_t at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, at))
    text.replace(at, placeholder.size(), dir.string());
  if (world.rank() == 0) fs::remove_all(dir / "run");
  world.barrier();
  Outcome o;
  try {
    Quiet quiet(dir / ("output-" + std::to_string(world.rank()) + ".log"));
    RunConfig c = read_run_config(ConfigFile::parse(text, "walk.yaml"));
    c.train.progress = false;
    TrainRequest request;
    request.config = "walk.yaml";
    request.threads = 1;
    TrainJob(std::move(c), request).run();
  } catch (const Error& e) {
    o.refused = true;
    o.error = e.what();
  }
  world.barrier();
  if (!o.refused && world.rank() == 0) o.fingerprint = fingerprint(dir / "run");
  return o;
}

// ---- the walk -------------------------------------------------------------------------------

// Keys the walk does not change, and why.
const std::map<std::string, std::string> kNotWalked = {
    {"run_dir", "where the run writes: the walk reads it"},
    {"model.kind", "chooses the mode: each mode is a walk of its own"},
    {"model.preset", "supplies the defaults of the model fields, which the walk gives and changes one by one"},
    {"model.name", "a registry model needs its plugin; tests/plugins train one"},
    {"model.dims", "the images decide it: a 2-D image for a 3-D model is refused naming the image"},
    {"model.in_channels", "the images decide it: a 3-band image for a 4-band model is refused naming the image"},
    {"data.pairs", "the data itself"},
    {"data.source.pairs", "the data itself"},
    {"data.targets", "the data itself"},
    {"data.dataset", "a folder of cases instead of pairs: tests/cli/msd_dataset.sh trains one"},
    {"parallel.dp", "the process grid: each mode is a walk of its own (ProcessGrid tests refuse grids that do not fit)"},
    {"parallel.pp", "the process grid: each mode is a walk of its own (ProcessGrid tests refuse grids that do not fit)"},
    {"parallel.sp", "the process grid: each mode is a walk of its own (ProcessGrid tests refuse grids that do not fit)"},
};

// Values for a key that every mode can run (YAML text): the walk takes the first that is not
// the baseline's. Keys not here take one from their type: a number one more (a real: twice,
// or 0.5 for 0), a bool flipped.
const std::map<std::string, std::vector<std::string>> kSamples = {
    {"model.levels", {"3"}},
    {"model.kernel", {"5"}},
    {"model.padding", {"same", "valid"}},
    {"model.norm", {"group", "instance"}},
    {"model.decoder", {"upsample", "transposed"}},
    {"model.classes", {"4"}},
    {"model.dsn.similarity", {"mmd"}},
    {"model.dsn.mmd_sigmas", {"[0.5, 4]"}},
    {"train.tile", {"24"}},
    {"train.checkpoint_every", {"1"}},
    {"train.optimizer", {"sgd"}},
    {"train.schedule", {"cosine"}},
    {"train.precision", {"bf16"}},
    {"train.warmup_steps", {"3"}},
    {"train.step_size", {"2"}},
    {"train.foreground_fraction", {"0.9"}},
    {"train.curriculum", {"[{epoch: 1, tile: 8}]"}},
    {"train.loss.kind", {"ce"}},
    {"train.loss.class_weights", {"[1, 2, 3]"}},
    {"train.loss.ignore_index", {"2"}},
    {"train.momentum", {"0.5"}},
    {"train.min_lr_fraction", {"0.5"}},
    {"train.augment_intensity_scale", {"0.5"}},
    {"train.augment_intensity_shift", {"0.5"}},
    {"train.augment_gaussian_noise", {"0.5"}},
    {"train.augment_uniform_noise", {"0.5"}},
    {"train.augment_rotation", {"30"}},
    {"train.augment_elastic", {"1"}},
    {"train.augment_probability", {"0.5"}},
    {"train.augment_scaling", {"0.5"}},
    {"train.augment_contrast", {"0.5"}},
    {"train.augment_gamma", {"0.5"}},
    {"parallel.gradient_compression", {"bf16"}},
    {"parallel.fusion_mib", {"0.001"}},
    {"parallel.schedule", {"gpipe"}},
    {"parallel.activation_checkpoint", {"always"}},
    {"parallel.micro_batches", {"1"}},
    {"parallel.sp_mesh", {"1x2"}},
    {"data.class_names", {"[x, y, z]"}},
    {"data.classes", {"[{name: x, color: '#102030'}, {name: y}, {name: z}]"}},
    {"data.background", {"none"}},
    {"data.holdout.axis", {"y"}},
    {"data.normalization.kind", {"mr"}},
    {"data.normalization.offset", {"[1, 1, 1]"}},
    {"data.normalization.scale", {"[2, 2, 2]"}},
    {"data.normalization.window", {"[-1, 2]"}},
    {"data.resample.spacing", {"[2, 2, 2]"}},
    {"data.resample.image", {"nearest"}},
    {"data.resample.labels", {"linear"}},
    {"data.validation", {"[case_1]"}},
    {"data.fold", {"1"}},
    {"data.folds", {"2"}},
};

// Keys that act only with other settings: walked with them, in the baseline and the change
// (unless the mode refuses the key, which it must whatever else is set).
const std::map<std::string, std::vector<std::pair<std::string, std::string>>> kEnabledBy = {
    {"train.momentum", {{"train.optimizer", "sgd"}}},
    {"train.step_size", {{"train.schedule", "step"}}},
    {"train.gamma", {{"train.schedule", "step"}, {"train.step_size", "2"}}},
    {"train.power", {{"train.schedule", "poly"}}},
    {"train.min_lr_fraction", {{"train.schedule", "cosine"}}},
    {"train.loss.dice_weight", {{"train.loss.kind", "dice_ce"}}},
    {"train.loss.ce_weight", {{"train.loss.kind", "dice_ce"}}},
    {"train.loss.focal_weight", {{"train.loss.kind", "adaptive_dice_focal"}}},
    {"train.loss.focal_gamma", {{"train.loss.kind", "focal"}}},
    {"data.normalization.offset",
     {{"data.normalization.kind", "affine"}, {"data.normalization.offset", "[0, 0, 0]"}, {"data.normalization.scale", "[1, 1, 1]"}}},
    {"data.normalization.scale",
     {{"data.normalization.kind", "affine"}, {"data.normalization.offset", "[0, 0, 0]"}, {"data.normalization.scale", "[1, 1, 1]"}}},
    {"data.normalization.window", {{"data.normalization.kind", "ct"}}},
    {"data.normalization.mask", {{"data.normalization.kind", "mr"}}},
    {"model.dsn.mmd_sigmas", {{"model.dsn.similarity", "mmd"}}},
    {"train.augment_elastic_sigma", {{"train.augment_elastic", "1"}}},
    // Heads on decoder levels with a weight: 4 levels (level 1), same padding.
    {"train.deep_supervision", {{"model.padding", "same"}, {"model.levels", "4"}}},
    {"train.augment_probability", {{"train.augment_rotation", "30"}}},
    // A model that stops learning, so that the first epoch without a better Dice comes soon.
    {"train.early_stopping", {{"train.learning_rate", "1e-12"}}},
};

// Keys whose effect is exact by design or needs more replicas than the mode has, by mode
// ("*": every mode): the run must write exactly what the baseline wrote.
const std::map<std::string, std::map<std::string, std::string>> kExact = {
    {"*", {{"train.prefetch", "reading ahead changes when batches are read, not which"}}},
    {"data1",
     {{"train.scale_learning_rate", "one replica scales the learning rate by 1"},
      {"parallel.scale_learning_rate", "one replica scales the learning rate by 1"},
      {"parallel.fusion_mib", "one replica sums no gradients"},
      {"parallel.overlap_allreduce", "one replica sums no gradients"},
      {"parallel.gradient_compression", "one replica sends no gradients"}}},
    {"pipeline",
     {{"parallel.schedule", "GPipe and 1F1B run the same micro-batches (Pipeline.* tests compare them)"},
      {"parallel.activation_checkpoint", "recomputation gives the same activations (Pipeline.*Checkpoint* tests)"},
      {"train.scale_learning_rate", "one replica (dp 1) scales the learning rate by 1"},
      {"parallel.scale_learning_rate", "one replica (dp 1) scales the learning rate by 1"}}},
    {"spatial",
     {{"train.scale_learning_rate", "one replica (dp 1) scales the learning rate by 1"},
      {"parallel.scale_learning_rate", "one replica (dp 1) scales the learning rate by 1"},
      {"train.sync_batch_norm", "one replica (dp 1): the blocks' statistics are already the whole tile's"}}},
    {"domain",
     {{"train.scale_learning_rate", "one replica per domain scales the learning rate by 1"},
      {"parallel.scale_learning_rate", "one replica per domain scales the learning rate by 1"}}},
};

// Keys a mode cannot run with another value, by mode, and why (the refusal is its own test).
const std::map<std::string, std::map<std::string, std::string>> kNoOtherValue = {
    {"spatial", {{"model.padding", "blocks need `same` padding (SpatialTraining tests refuse valid)"}}},
    {"domain", {{"model.padding", "a DSN reconstructs its input: `same` only (DsnOptions tests refuse valid)"}}},
    {"pipeline",
     {{"train.loss.dice_weight", "Dice losses do not split over micro-batches: a pipeline trains ce or focal"},
      {"train.loss.ce_weight", "Dice losses do not split over micro-batches: a pipeline trains ce or focal"},
      {"train.loss.focal_weight", "Dice losses do not split over micro-batches: a pipeline trains ce or focal"},
      {"train.loss.smooth", "Dice smoothing: Dice losses do not split over micro-batches, a pipeline trains ce or focal"},
      {"train.loss.kind", "ce is the baseline; dice, dice_ce and adaptive_dice_focal do not split over micro-batches"}}},
};

void set_key(YAML::Node root, const std::string& key, const std::string& value) {
  std::vector<std::string> parts;
  std::stringstream s(key);
  for (std::string p; std::getline(s, p, '.');) parts.push_back(p);
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) chain.push_back(chain.back()[parts[i]]);
  chain.back()[parts.back()] = YAML::Load(value);
}

std::string with_settings(const std::string& yaml, const std::vector<std::pair<std::string, std::string>>& settings) {
  YAML::Node root = YAML::Load(yaml);
  for (const auto& [key, value] : settings) set_key(root, key, value);
  YAML::Emitter e;
  e << root;
  return std::string(e.c_str()) + "\n";
}

// A value for `key` other than `current` (its value in the baseline, as the resolved config
// writes it), as YAML text; "" when there is none.
std::string sample_for(const std::string& key, const std::string& current) {
  const auto given = kSamples.find(key);
  if (given != kSamples.end()) {
    for (const std::string& v : given->second) {
      YAML::Emitter e;
      e << YAML::Flow << YAML::Load(v);
      if (e.c_str() != current) return v;
    }
    return "";
  }
  const YAML::Node v = YAML::Load(current);
  if (!v.IsScalar()) return "";
  const std::string text = v.as<std::string>();
  if (text == "true") return "false";
  if (text == "false") return "true";
  try {
    size_t used = 0;
    const long long i = std::stoll(text, &used);
    if (used == text.size()) return std::to_string(i + 1);
    const double d = std::stod(text, &used);
    if (used == text.size()) return number(d == 0 ? 0.5 : 2 * d);
  } catch (const std::exception&) {
  }
  return "";
}

std::string exact_reason(const std::string& mode, const std::string& key) {
  for (const std::string& m : {std::string("*"), mode}) {
    const auto by_mode = kExact.find(m);
    if (by_mode == kExact.end()) continue;
    const auto it = by_mode->second.find(key);
    if (it != by_mode->second.end()) return it->second;
  }
  return "";
}

// Whether the engine refuses `key` for a run of `c` on rasters (train_settings.hpp).
bool refused(const RunConfig& c, const std::string& key) {
  std::vector<RefusedSetting> all = refused_settings(c);
  for (const RefusedSetting& s : refused_for_rasters()) all.push_back(s);
  for (const RefusedSetting& s : all)
    if (s.key == key || (s.key.back() == '.' && key.rfind(s.key, 0) == 0)) return true;
  return false;
}

// What one changed key did against its baseline: "" when that is what the table and the
// exact list say, else the problem.
std::string judge(const std::string& what, bool is_refused, const std::string& key, const std::string& exact,
                  const Outcome& before, const Outcome& after) {
  if (is_refused) {
    if (!after.refused) return what + ": the table refuses it, but the run went on\n";
    if (after.error.find(key) == std::string::npos) return what + ": refused without naming it: " + after.error + "\n";
    return "";
  }
  if (after.refused) return what + ": refused, but the table says the mode honours it: " + after.error + "\n";
  const bool same = after.fingerprint == before.fingerprint;
  if (exact.empty() && same) return what + ": silently ignored (the run wrote exactly what the baseline wrote)\n";
  if (!exact.empty() && !same) return what + ": listed as exact (" + exact + ") but the run wrote something else\n";
  return "";
}

// The problems of one mode's walk, one line each; "" when every key is honoured or refused.
std::string walk(const std::string& mode_name, const std::string& yaml) {
  parallel::Communicator& world = parallel::world();
  const fs::path dir = fs::temp_directory_path() / ("tessera-settings-walk-" + std::to_string(::getppid()) + "-" + mode_name);
  if (world.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    write_scene(dir / "a.tif", false, 0, 1);
    write_scene(dir / "a_labels.tif", true, 0, 1);
    write_scene(dir / "b.tif", false, 0.5, 2);
  }
  world.barrier();
  std::string problems;
  const RunConfig base_config = read_run_config(ConfigFile::parse(yaml, "walk.yaml"));
  std::map<std::string, std::string> current;
  for (const auto& [key, value] : setting_values(base_config)) current[key] = value;
  std::map<std::string, Outcome> baselines;  // by the YAML they ran
  int walked = 0;
  const auto cannot = kNoOtherValue.find(mode_name);
  for (const std::string& key : field_keys(RunConfig{})) {
    if (kNotWalked.count(key) || (cannot != kNoOtherValue.end() && cannot->second.count(key))) continue;
    const bool is_refused = refused(base_config, key);
    const auto enabled = kEnabledBy.find(key);
    const std::string base = is_refused || enabled == kEnabledBy.end() ? yaml : with_settings(yaml, enabled->second);
    if (!baselines.count(base)) baselines[base] = run(base, dir);
    const Outcome& before = baselines[base];
    if (before.refused) {
      problems += key + ": its baseline fails: " + before.error + "\n";
      continue;
    }
    std::string now = current.count(key) ? current[key] : "";
    if (enabled != kEnabledBy.end() && !is_refused)
      for (const auto& [k, v] : enabled->second)
        if (k == key) now = v;
    const std::string value = sample_for(key, now);
    if (value.empty()) {
      problems += key + ": no sample value other than the baseline's " + now + " (add one to kSamples)\n";
      continue;
    }
    const Outcome after = run(with_settings(base, {{key, value}}), dir);
    ++walked;
    if (world.rank() == 0)
      problems += judge(key + " " + value + " (" + mode_name + ")", is_refused, key, exact_reason(mode_name, key), before, after);
  }
  if (world.rank() == 0) {
    std::printf("[ walk     ] %s: %d keys changed one at a time\n", mode_name.c_str(), walked);
    fs::remove_all(dir);
  }
  return problems;
}

TEST(SettingsWalk, DataParallelOnOneRankHonoursOrRefusesEveryKey) {
  ASSERT_EQ(parallel::world().size(), 1) << "run under mpirun -np 1 (ctest settings.walk_data1)";
  EXPECT_EQ(walk("data1", baseline(kModel, "dp: 1", false)), "");
}

TEST(SettingsWalk, DataParallelHonoursOrRefusesEveryKey) {
  ASSERT_EQ(parallel::world().size(), 2) << "run under mpirun -np 2 (its settings.walk_* ctest entry)";
  EXPECT_EQ(walk("data2", baseline(kModel, "dp: 2", false)), "");
}

TEST(SettingsWalk, PipelineHonoursOrRefusesEveryKey) {
  ASSERT_EQ(parallel::world().size(), 2) << "run under mpirun -np 2 (its settings.walk_* ctest entry)";
  EXPECT_EQ(walk("pipeline", baseline(kGroupNormModel, "pp: 2", false, "loss: {kind: ce}")), "");
}

TEST(SettingsWalk, SpatialHonoursOrRefusesEveryKey) {
  ASSERT_EQ(parallel::world().size(), 2) << "run under mpirun -np 2 (its settings.walk_* ctest entry)";
  EXPECT_EQ(walk("spatial", baseline(std::string(kModel) + ", padding: same", "sp: 2", false)), "");
}

TEST(SettingsWalk, DomainParallelHonoursOrRefusesEveryKey) {
  ASSERT_EQ(parallel::world().size(), 2) << "run under mpirun -np 2 (its settings.walk_* ctest entry)";
  EXPECT_EQ(walk("domain", baseline(std::string(kGroupNormModel) + ", padding: same, kind: dsn", "", true)), "");
}

}  // namespace
}  // namespace tessera::engine
