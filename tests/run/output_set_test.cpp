// The outputs of one run commit together or not at all (run/output_set.hpp): every staged
// file and its side files appear at once; a failure before or during the commit leaves the
// final folders as they were, earlier files included.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/core/error.hpp"
#include "tessera/run/output_set.hpp"
#include "tessera/run/run_layout.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("tessera-output-set-test-" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Two outputs in two folders, one with a side file its writer put beside it.
void stage_two(OutputSet& set, const fs::path& a, const fs::path& b) {
  const std::string staged_a = set.stage(a.string());
  write(staged_a, "labels");
  write(staged_a + ".aux.xml", "side");
  write(set.stage(b.string()), "overlay");
}

TEST(OutputSet, CommitMovesEveryFileAndSideFileIntoPlace) {
  TempDir dir;
  const fs::path a = dir.path / "out" / "labels.tif", b = dir.path / "pictures" / "overlay.png";
  OutputSet set;
  stage_two(set, a, b);
  EXPECT_FALSE(fs::exists(a));
  EXPECT_TRUE(RunLayout::is_temporary(fs::path(set.locate(a.string())).parent_path().filename().string()));
  EXPECT_EQ(set.final_of(set.locate(a.string()) + ".aux.xml"), a.string() + ".aux.xml");
  set.commit();
  EXPECT_EQ(read(a), "labels");
  EXPECT_EQ(read(a.string() + ".aux.xml"), "side");
  EXPECT_EQ(read(b), "overlay");
  for (const fs::path& folder : {dir.path / "out", dir.path / "pictures"})
    for (const auto& e : fs::directory_iterator(folder))
      EXPECT_FALSE(RunLayout::is_temporary(e.path().filename().string())) << e.path();
}

TEST(OutputSet, AnUncommittedSetLeavesNothing) {
  TempDir dir;
  const fs::path a = dir.path / "labels.tif", b = dir.path / "overlay.png";
  {
    OutputSet set;
    stage_two(set, a, b);
  }
  EXPECT_TRUE(fs::is_empty(dir.path));
}

// A folder where a side file goes: nothing moves, and the file the run would have replaced
// keeps its old contents.
TEST(OutputSet, ATargetThatCannotBeReplacedMovesNothing) {
  TempDir dir;
  const fs::path a = dir.path / "labels.tif", b = dir.path / "overlay.png";
  write(a, "yesterday's labels");
  fs::create_directories(a.string() + ".aux.xml/x");
  OutputSet set;
  stage_two(set, a, b);
  try {
    set.commit();
    FAIL() << "a commit over a folder succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(".aux.xml"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read(a), "yesterday's labels");
  EXPECT_FALSE(fs::exists(b));
}

// A killed run's staging folder (its process gone) is removed by the next set that stages
// into the folder on the same host; a live process's folder and another host's stay.
TEST(OutputSet, StagingRemovesWhatAKilledRunOfThisHostLeft) {
  TempDir dir;
  char host[HOST_NAME_MAX + 1] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const pid_t child = ::fork();  // a pid that is surely gone once waited for
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const std::string prefix = std::string(".tessera.partial-") + host + "-";
  const fs::path dead = dir.path / (prefix + std::to_string(child));
  const fs::path live = dir.path / (prefix + std::to_string(::getppid()));
  const fs::path other = dir.path / (".tessera.partial-some-other-host-" + std::to_string(child));
  for (const fs::path& p : {dead, live, other}) {
    fs::create_directories(p);
    write(p / "labels.tif", "left");
  }
  OutputSet set;
  write(set.stage((dir.path / "labels.tif").string()), "new");
  EXPECT_FALSE(fs::exists(dead)) << "the killed run's staging folder is still there";
  EXPECT_TRUE(fs::exists(live / "labels.tif")) << "a live process's staging folder was removed";
  EXPECT_TRUE(fs::exists(other / "labels.tif")) << "another host's staging folder was removed";
  set.commit();
  EXPECT_EQ(read(dir.path / "labels.tif"), "new");
}

}  // namespace
}  // namespace tessera
