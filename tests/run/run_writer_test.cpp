// RunWriter's metrics.jsonl across runs in one directory: a resumed run keeps the lines up to
// its checkpoint's step and appends; a fresh run starts the file anew, so readers (the folds'
// summary, tessera-view) never see an earlier run's steps or validations as this one's.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "tessera/run/run_writer.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

void run_steps(const std::string& dir, std::optional<int64_t> resumed_from, std::vector<int64_t> steps, double loss) {
  RunWriter w(dir);
  w.on_begin(resumed_from);
  for (int64_t s : steps) {
    StepMetrics m;
    m.step = s;
    m.loss = loss;
    w.on_step(m);
  }
}

std::vector<std::pair<int64_t, double>> logged(const std::string& dir) {
  std::vector<std::pair<int64_t, double>> out;
  for (const StepMetrics& m : read_metrics(RunLayout(dir).metrics()).steps) out.emplace_back(m.step, m.loss.value_or(-1));
  return out;
}

TEST(RunWriter, AFreshRunStartsTheMetricsAnewAndAResumedOneKeepsItsSteps) {
  const fs::path dir = fs::temp_directory_path() / ("tessera-run-writer-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  run_steps(dir.string(), std::nullopt, {1, 2, 3}, 0.5);
  run_steps(dir.string(), 2, {3, 4}, 0.25);  // killed after 3, resumed from step 2
  EXPECT_EQ(logged(dir.string()), (std::vector<std::pair<int64_t, double>>{{1, 0.5}, {2, 0.5}, {3, 0.25}, {4, 0.25}}));
  run_steps(dir.string(), std::nullopt, {1}, 0.125);  // the same directory trained again from scratch
  EXPECT_EQ(logged(dir.string()), (std::vector<std::pair<int64_t, double>>{{1, 0.125}}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera
