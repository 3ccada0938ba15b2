// The options binding (tessera/core/options_binding.hpp, cli/train_config.hpp): defaults are
// valid, every key of the project's own configs survives the resolved config.yaml, unknown
// keys fail with file:line and the closest key, a flag and its YAML key set the same field,
// and the checkpoint JSON keeps its spelling.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/engine/config_file.hpp"
#include "model_options.hpp"
#include "options_cli.hpp"
#include "tessera/engine/options_yaml.hpp"
#include "tessera/engine/preprocessing.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/core/model_json.hpp"

namespace tessera::cli {

using namespace ::tessera::engine;  // the engine library (engine/): transitional, until the command is thin
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The YAML block after "A training config" in README.md (what tests/cli/bad_input.sh checks too).
std::string readme_config() {
  const std::string text = read_text(fs::path(TESSERA_SOURCE_DIR) / "README.md");
  const size_t intro = text.find("A training config");
  const size_t begin = text.find("```yaml\n", intro);
  const size_t end = text.find("```", begin + 8);
  if (intro == std::string::npos || begin == std::string::npos || end == std::string::npos) return {};
  return text.substr(begin + 8, end - begin - 8);
}

// The project's own configs: sample_data/*.yaml and the README's example.
std::vector<std::pair<std::string, std::string>> project_configs() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : fs::directory_iterator(fs::path(TESSERA_SOURCE_DIR) / "sample_data"))
    if (e.path().extension() == ".yaml") out.emplace_back(e.path().string(), read_text(e.path()));
  out.emplace_back("README.md", readme_config());
  return out;
}

RunConfig parse(const std::string& text, const std::string& name = "test.yaml") {
  return read_run_config(ConfigFile::parse(text, name));
}

const char* kMinimal = "data: {pairs: [{image: a.tif, labels: b.tif}]}\n";

// Every key `given` has, `resolved` has with an equal value (numbers compared as numbers).
void expect_contained(const YAML::Node& given, const YAML::Node& resolved, const std::string& path) {
  ASSERT_TRUE(resolved.IsDefined()) << path << ": missing from the resolved config";
  if (given.IsMap()) {
    ASSERT_TRUE(resolved.IsMap()) << path;
    for (const auto& kv : given) {
      const std::string key = kv.first.Scalar();
      expect_contained(kv.second, resolved[key], path.empty() ? key : path + "." + key);
    }
  } else if (given.IsSequence()) {
    ASSERT_TRUE(resolved.IsSequence()) << path;
    ASSERT_EQ(given.size(), resolved.size()) << path;
    for (size_t i = 0; i < given.size(); ++i) expect_contained(given[i], resolved[i], path + "[" + std::to_string(i) + "]");
  } else if (given.Scalar() != resolved.Scalar()) {
    double a = 0, b = 0;
    ASSERT_TRUE(YAML::convert<double>::decode(given, a) && YAML::convert<double>::decode(resolved, b))
        << path << ": '" << given.Scalar() << "' became '" << resolved.Scalar() << "'";
    EXPECT_EQ(a, b) << path;
  }
}

bool has_path(const YAML::Node& doc, const std::string& dotted) {
  YAML::Node node = doc;
  std::stringstream parts(dotted);
  for (std::string part; std::getline(parts, part, '.');) {
    const YAML::Node& here = node;  // const: lookups add nothing
    if (!here.IsMap() || !here[part]) return false;
    node.reset(here[part]);  // not `node = …`: that assigns into the document
  }
  return true;
}

// ---- defaults ---------------------------------------------------------------------------

TEST(UNetOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(UNetOptions().validate());
  for (const std::string& name : unet_preset_names()) EXPECT_NO_THROW(unet_preset(name).validate()) << name;
}

TEST(TrainOptions, DefaultsAreValid) {
  TrainOptions t;
  EXPECT_THROW(t.validate(UNetOptions()), Error);  // run_dir is the one required field
  t.run_dir = "run";
  EXPECT_NO_THROW(t.validate(UNetOptions()));
}

TEST(OptimizerOptions, DefaultsAreValid) { EXPECT_NO_THROW(OptimizerOptions().validate()); }

TEST(LossOptions, DefaultsAreValid) { EXPECT_NO_THROW(LossOptions().validate(UNetOptions().classes)); }

TEST(Preprocessing, DefaultsAreValidAndBadValuesNameTheirKey) {
  EXPECT_NO_THROW(validate(NormalizationConfig(), "run.yaml"));
  EXPECT_NO_THROW(validate(ResampleConfig(), "run.yaml"));
  auto message = [](auto config) {
    try {
      validate(config, "run.yaml");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  NormalizationConfig n;
  n.kind = "zscore";
  EXPECT_EQ(message(n), "run.yaml: data.normalization.kind: 'zscore' is not one of auto, affine, raster, ct, mr");
  n = {};
  n.kind = "ct";
  n.window = {240, -160};
  EXPECT_EQ(message(n), "run.yaml: data.normalization.window: must be [low, high] with low < high");
  ResampleConfig r;
  r.labels = "linear";
  EXPECT_EQ(message(r), "run.yaml: data.resample.labels: 'linear': labels are resampled by nearest neighbour only");
  r = {};
  r.spacing = {1, 1};
  EXPECT_EQ(message(r), "run.yaml: data.resample.spacing: needs 3 values (x, y, z in mm)");
}

TEST(Holdout, DefaultsAreValid) {
  EXPECT_NO_THROW(Holdout().validate(2));
  EXPECT_NO_THROW(Holdout().validate(3));
}

TEST(RunConfig, DefaultsAreValid) {
  RunConfig c;
  c.train.run_dir = "run";
  EXPECT_NO_THROW(c.model.options.validate());
  EXPECT_NO_THROW(c.train.validate(c.model.options));
  EXPECT_NO_THROW(c.data.holdout.validate(c.model.options.dims));
  // A config naming only its data reads as the defaults.
  RunConfig read = parse(kMinimal);
  read.data.pairs.clear();
  c.train.run_dir.clear();
  EXPECT_EQ(resolved_config_yaml(read), resolved_config_yaml(c));
}

// ---- the resolved config.yaml -----------------------------------------------------------

TEST(ResolvedConfig, HoldsEveryDeclaredKeyAndReadsBackEqual) {
  const RunConfig c = parse(kMinimal);
  const std::string yaml = resolved_config_yaml(c);
  const YAML::Node doc = YAML::Load(yaml);
  const std::vector<std::string> keys = field_keys(RunConfig());
  EXPECT_GT(keys.size(), 60u);
  for (const std::string& key : keys) EXPECT_TRUE(has_path(doc, key)) << key << " missing:\n" << yaml;
  EXPECT_EQ(resolved_config_yaml(parse(yaml, "config.yaml")), yaml);
}

TEST(ResolvedConfig, EveryKeyOfTheProjectsConfigsRoundTrips) {
  const auto configs = project_configs();
  ASSERT_GE(configs.size(), 3u);
  for (const auto& [name, text] : configs) {
    SCOPED_TRACE(name);
    ASSERT_FALSE(text.empty());
    const RunConfig first = parse(text, name);
    const std::string resolved = resolved_config_yaml(first);
    expect_contained(YAML::Load(text), YAML::Load(resolved), "");
    const RunConfig again = parse(resolved, "config.yaml");
    EXPECT_EQ(resolved_config_yaml(again), resolved);
    EXPECT_EQ(again.model.options, first.model.options);
    EXPECT_EQ(again.train.optimizer.learning_rate, first.train.optimizer.learning_rate);
    EXPECT_EQ(again.train.curriculum.size(), first.train.curriculum.size());
  }
}

TEST(ResolvedConfig, ClassNamesStayOnOneLine) {  // the viewer reads `class_names: [a, b]`
  const std::string yaml =
      resolved_config_yaml(parse("data: {pairs: [{image: a.tif, labels: b.tif}], class_names: [sea, land]}\n"));
  EXPECT_NE(yaml.find("class_names: [sea, land]"), std::string::npos) << yaml;
}

// ---- unknown keys -----------------------------------------------------------------------

void expect_error(const std::string& text, const std::string& message) {
  try {
    parse(text, "run.yaml");
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(ConfigKeys, AnUnknownKeyFailsWithFileLineAndTheClosestKey) {
  expect_error(std::string(kMinimal) + "train:\n  steps: 3\n  learnig_rate: 0.1\n",
               "run.yaml:4: unknown key 'train.learnig_rate' (did you mean 'learning_rate'?)");
  expect_error(std::string(kMinimal) + "model: {preset: unet-tiny, base_filter: 8}\n",
               "run.yaml:2: unknown key 'model.base_filter' (did you mean 'base_filters'?)");
  expect_error(std::string(kMinimal) + "train:\n  loss: {kind: dice, smoth: 1}\n",
               "run.yaml:3: unknown key 'train.loss.smoth' (did you mean 'smooth'?)");
  expect_error(std::string(kMinimal) + "train:\n  curriculum: [{epoch: 0, tiles: 32}]\n",
               "run.yaml:3: unknown key 'train.curriculum[0].tiles' (did you mean 'tile'?)");
  expect_error(std::string(kMinimal) + "paralel: {dp: 2}\n", "run.yaml:2: unknown key 'paralel' (did you mean 'parallel'?)");
}

// ---- flags ------------------------------------------------------------------------------

// A flag for each config key `tessera train` takes on its command line, and a value for it.
const std::vector<std::pair<std::string, std::string>> kTrainFlagValues = {
    {"run_dir", "/tmp/somewhere"},  {"train.steps", "7"},         {"train.tile", "32"},
    {"train.steps_per_epoch", "11"},
    {"train.batch", "3"},           {"train.learning_rate", "0.25"}, {"train.seed", "9"},
    {"train.warmup_steps", "5"},    {"parallel.dp", "2"},         {"parallel.pp", "2"},
    {"parallel.sp", "3"},           {"parallel.sp_mesh", "3x1"},  {"model.padding", "same"},
    {"parallel.micro_batches", "2"}, {"parallel.schedule", "gpipe"},
    {"parallel.activation_checkpoint", "always"}, {"parallel.fusion_mib", "12.5"},
    {"parallel.scale_learning_rate", "true"}};

// "train.steps: 7" as nested YAML.
std::string as_yaml(const std::string& key, const std::string& value) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) return key + ": " + value + "\n";
  return key.substr(0, dot) + ": {" + key.substr(dot + 1) + ": " + value + "}\n";
}

TEST(ConfigKeys, ATrainFlagAndItsYamlKeySetTheSameField) {
  ASSERT_EQ(kTrainFlagValues.size(), train_flags().size());
  const RunConfig defaults = parse(kMinimal);
  for (const auto& [key, value] : kTrainFlagValues) {
    SCOPED_TRACE(key);
    const RunConfig from_file = parse(std::string(kMinimal) + as_yaml(key, value));
    CLI::App app;
    FlagOverrides<RunConfig> overrides;
    std::vector<FlagOverrides<RunConfig>::Flag> flags;
    for (const TrainFlag& f : train_flags()) flags.push_back({f.key, f.aliases});
    overrides.add_to(&app, flags);
    const bool is_flag = key == "parallel.scale_learning_rate";
    app.parse(flag_name(key) + (is_flag ? "" : " " + value));
    RunConfig from_flag = parse(kMinimal);
    overrides.apply(from_flag);
    EXPECT_NE(resolved_config_yaml(from_flag), resolved_config_yaml(defaults));
    EXPECT_EQ(resolved_config_yaml(from_flag), resolved_config_yaml(from_file));
  }
}

TEST(ConfigKeys, OldFlagSpellingsStillWork) {
  CLI::App app;
  FlagOverrides<RunConfig> overrides;
  std::vector<FlagOverrides<RunConfig>::Flag> flags;
  for (const TrainFlag& f : train_flags()) flags.push_back({f.key, f.aliases});
  overrides.add_to(&app, flags);
  app.parse("--lr 0.5 --scale-lr");
  RunConfig c = parse(kMinimal);
  overrides.apply(c);
  EXPECT_EQ(c.train.optimizer.learning_rate, 0.5);
  EXPECT_TRUE(c.train.scale_learning_rate);
}

TEST(ConfigKeys, AModelFlagAndItsYamlKeySetTheSameField) {
  const std::vector<std::pair<std::string, std::string>> values = {
      {"dims", "3"},   {"in_channels", "2"},   {"classes", "3"},       {"levels", "3"},    {"convs_per_level", "1"},
      {"base_filters", "8"}, {"kernel", "5"}, {"padding", "same"}, {"norm", "batch"}, {"decoder", "upsample"},
      {"name", "se-unet"}};
  ASSERT_EQ(values.size(), field_keys(UNetOptions()).size());
  for (const auto& [key, value] : values) {
    SCOPED_TRACE(key);
    const UNetOptions from_file = parse(std::string(kMinimal) + "model: {preset: unet-tiny, " + key + ": " + value + "}\n").model.options;
    EXPECT_NE(from_file, unet_preset("unet-tiny"));
    CLI::App app;
    ModelFlags flags;
    flags.add_to(&app);
    app.parse("--model unet-tiny " + flag_name(key) + " " + value);
    UNetOptions from_flag = unet_preset("unet-tiny");
    flags.overrides.apply(from_flag);
    EXPECT_EQ(from_flag, from_file);
    EXPECT_EQ(flags.given(key).value_or(""), value);
  }
  CLI::App app;  // the older spellings
  ModelFlags flags;
  flags.add_to(&app);
  app.parse("--filters 8 --convs 1");
  EXPECT_EQ(flags.resolve(), unet_preset("unet-tiny").with_base_filters(8).with_convs_per_level(1));
}

// ---- checkpoint JSON --------------------------------------------------------------------

TEST(ModelJson, SpellsTheYamlKeysAndReadsOldCheckpoints) {
  for (const std::string& name : unet_preset_names()) {
    const UNetOptions o = unet_preset(name);
    nlohmann::json bound;
    options_to_json(bound, o);
    EXPECT_EQ(bound, nlohmann::json(o)) << name;  // the checkpoint writer's spelling
    UNetOptions back;
    options_from_json(bound, back);
    EXPECT_EQ(back, o);
  }
  // The "model" object of a checkpoint written before the binding (tessera 2026-11).
  const auto old = nlohmann::json::parse(
      R"({"base_filters":16,"classes":4,"convs_per_level":2,"decoder":"transposed","dims":2,"in_channels":4,)"
      R"("kernel":3,"levels":4,"norm":"none","padding":"valid"})");
  UNetOptions read;
  options_from_json(old, read);
  EXPECT_EQ(read, unet_preset("unet-tiny"));
  EXPECT_EQ(old.get<UNetOptions>(), read);
  std::vector<std::string> json_keys;
  for (const auto& kv : old.items()) json_keys.push_back(kv.key());
  std::vector<std::string> declared = field_keys(UNetOptions());
  // Every key but the model's name, which came later (a checkpoint without it is "unet").
  declared.erase(std::remove(declared.begin(), declared.end(), "name"), declared.end());
  std::sort(declared.begin(), declared.end());
  EXPECT_EQ(json_keys, declared);  // nlohmann sorts keys
  EXPECT_EQ(read.name, "unet");
}

}  // namespace
}  // namespace tessera::cli

// ---- a Domain Separation Network's data --------------------------------------------------

namespace tessera::cli {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DsnConfig, SourceAndTargetsAreRequiredAndOnlyForADsn) {
  const std::string dsn = "model: {kind: dsn}\n";
  const RunConfig c = parse(dsn + "data: {source: {pairs: [{image: a.tif, labels: b.tif}]}, targets: [{images: [t.tif, u.tif]}]}\n");
  EXPECT_TRUE(c.model.is_dsn());
  ASSERT_EQ(c.data.targets.size(), 1u);
  EXPECT_EQ(c.data.targets[0].images.size(), 2u);
  EXPECT_EQ(c.data.source.pairs.at(0).labels, "b.tif");
  EXPECT_NE(error_of(dsn + "data: {pairs: [{image: a.tif, labels: b.tif}], targets: [{images: [t.tif]}]}\n").find("data.source.pairs"),
            std::string::npos);
  EXPECT_NE(error_of(dsn + "data: {source: {pairs: [{image: a.tif, labels: b.tif}]}}\n").find("data.targets"), std::string::npos);
  EXPECT_NE(error_of(dsn + "data: {source: {pairs: [{image: a.tif}]}, targets: [{images: [t.tif]}]}\n").find("labels"),
            std::string::npos);
  EXPECT_NE(error_of(dsn + "data: {source: {pairs: [{image: a.tif, labels: b.tif}]}, targets: [{images: []}]}\n").find("images"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + "model: {kind: dnn}\n").find("unet or dsn"), std::string::npos);
  EXPECT_NE(error_of("data: {pairs: [{image: a.tif, labels: b.tif}], targets: [{images: [t.tif]}]}\n").find("kind dsn"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::cli
