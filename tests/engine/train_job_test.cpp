// TrainJob's refusals: a setting the path it takes does not honour is refused in one line
// naming the key, before any image is opened (the images these configs name do not exist,
// so a refusal that came after opening would name the missing file instead).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/error.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/engine/train_job.hpp"

namespace tessera::engine {
namespace {

const char* kDsn =
    "run_dir: /nonexistent/run\n"
    "model: {kind: dsn}\n"
    "data: {source: {pairs: [{image: /nonexistent/a.tif, labels: /nonexistent/b.tif}]}, "
    "targets: [{images: [/nonexistent/t.tif]}]}\n";

// The error a DSN run with `extra` YAML (or the request's flags) stops with.
std::string dsn_error(const std::string& extra, TrainRequest request = {}) {
  request.config = "dsn.yaml";
  try {
    TrainJob(read_run_config(ConfigFile::parse(std::string(kDsn) + extra, "dsn.yaml")), request).run();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DsnTrainJob, RefusesEverySettingItDoesNotHonourNamingIt) {
  // The plain config gets as far as opening the source image: nothing is refused.
  EXPECT_NE(dsn_error("").find("/nonexistent/a.tif"), std::string::npos) << dsn_error("");
  const std::pair<const char*, const char*> keyed[] = {
      {"parallel: {gradient_compression: bf16}\n", "parallel.gradient_compression"},
      {"parallel: {fusion_mib: 4}\n", "parallel.fusion_mib"},
      {"parallel: {overlap_allreduce: false}\n", "parallel.overlap_allreduce"},
      {"train: {precision: bf16}\n", "train.precision"},
      {"parallel: {pp: 12}\n", "pipeline layers (its encoder levels, then its heads)"},
      {"parallel: {micro_batches: 1}\n", "parallel.micro_batches"},
      {"parallel: {schedule: gpipe}\n", "parallel.schedule"},
  };
  for (const auto& [yaml, key] : keyed) {
    const std::string e = dsn_error(yaml);
    EXPECT_NE(e.find(key), std::string::npos) << yaml << " -> " << e;
    EXPECT_EQ(e.find("/nonexistent/a.tif"), std::string::npos) << yaml << " was not refused before reading: " << e;
  }
  // The one trainer's settings and requests are the DSN's too: these get as far as the image.
  for (const char* yaml :
       {"train: {early_stopping: 3}\n", "train: {accumulate: 2, grad_clip: 1.0}\n", "parallel: {sp: 2, sp_mesh: '2'}\n",
        "parallel: {pp: 2, schedule: gpipe, activation_checkpoint: always}\n"})
    EXPECT_NE(dsn_error(yaml).find("/nonexistent/a.tif"), std::string::npos) << yaml << " -> " << dsn_error(yaml);
  TrainRequest profiled;
  profiled.profile = "trace.json";
  EXPECT_NE(dsn_error("", profiled).find("/nonexistent/a.tif"), std::string::npos) << dsn_error("", profiled);
  TrainRequest resumed;
  resumed.resume = "auto";
  EXPECT_NE(dsn_error("", resumed).find("/nonexistent/a.tif"), std::string::npos) << dsn_error("", resumed);
}

}  // namespace
}  // namespace tessera::engine

namespace tessera::engine {
namespace {

// RUN/config.yaml names its images absolutely (read relative to the config file), so the run
// directory is self-contained: tessera-view and a rerun find them wherever they start.
TEST(ResolvedConfig, DataPathsAreAbsoluteAndRelativeToTheConfigFile) {
  const std::string yaml =
      "run_dir: run\n"
      "model: {kind: dsn}\n"
      "data: {source: {pairs: [{image: s/a.tif, labels: ../b.tif}]}, targets: [{images: [t.tif, /abs/u.tif]}]}\n";
  RunConfig c = read_run_config(ConfigFile::parse(yaml, "/data/cfg/x.yaml"));
  absolute_data_paths(c, "/data/cfg/x.yaml");
  EXPECT_EQ(c.data.source.pairs[0].image, "/data/cfg/s/a.tif");
  EXPECT_EQ(c.data.source.pairs[0].labels, "/data/b.tif");
  EXPECT_EQ(c.data.targets[0].images, (std::vector<std::string>{"/data/cfg/t.tif", "/abs/u.tif"}));
  const std::string resolved = resolved_config_yaml(c);
  EXPECT_NE(resolved.find("/data/cfg/s/a.tif"), std::string::npos) << resolved;
  // A config given by a relative name: absolute from the working directory.
  RunConfig plain = read_run_config(ConfigFile::parse("data: {pairs: [{image: a.tif, labels: b.tif}]}\n", "cfg/y.yaml"));
  absolute_data_paths(plain, "cfg/y.yaml");
  EXPECT_EQ(plain.data.pairs[0].image, (std::filesystem::current_path() / "cfg/a.tif").string());
}


// The folds' summary: a fold that validated nothing is shown as such and left out of the mean
// (it used to enter as -1 and pull the mean down).
TEST(FoldSummary, AFoldThatValidatedNothingIsLeftOutOfTheMean) {
  const std::vector<std::string> names{"background", "liver"};
  FoldResult a{0, "r/fold-0", 0.8, {std::nullopt, 0.8}, 10};
  FoldResult b{1, "r/fold-1", 0.6, {std::nullopt, 0.6}, 10};
  FoldResult none{2, "r/fold-2", -1, {}, 0};
  const std::string both = describe_folds({a, b}, names);
  EXPECT_NE(both.find("mean over 2 folds: 0.7000"), std::string::npos) << both;
  const std::string with_none = describe_folds({a, b, none}, names);
  EXPECT_NE(with_none.find("mean over the 2 of 3 folds that validated: 0.7000"), std::string::npos) << with_none;
  EXPECT_NE(with_none.find("no val"), std::string::npos) << with_none;
  EXPECT_EQ(with_none.find("-1"), std::string::npos) << with_none;
  const std::string nothing = describe_folds({none}, names);
  EXPECT_NE(nothing.find("none of the 1 validated"), std::string::npos) << nothing;
}

}  // namespace
}  // namespace tessera::engine
