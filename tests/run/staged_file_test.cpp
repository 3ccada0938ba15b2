// Staged output: a file appears under its final name complete or not at all, and its
// temporary is a name the run-directory readers skip.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/run/run_layout.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("tessera-run-test-" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(path)) out.push_back(e.path().filename().string());
    return out;
  }
};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(StagedFile, CommitMakesTheFileAppear) {
  TempDir dir;
  const std::string final_path = (dir.path / "sub" / "labels.tif").string();
  StagedFile f(final_path, ".tif");
  EXPECT_TRUE(fs::is_directory(dir.path / "sub")) << "the target's folder is made";
  std::ofstream(f.path()) << "complete";
  EXPECT_FALSE(fs::exists(final_path)) << "nothing under the final name before commit";
  EXPECT_TRUE(RunLayout::is_temporary(fs::path(f.path()).filename().string())) << f.path();
  EXPECT_EQ(fs::path(f.path()).extension(), ".tif") << "the format-giving extension is kept";
  f.commit();
  EXPECT_EQ(read(final_path), "complete");
  EXPECT_FALSE(fs::exists(f.path()));
}

TEST(StagedFile, ADestroyedUncommittedFileLeavesNothing) {
  TempDir dir;
  const std::string final_path = (dir.path / "out.json").string();
  {
    StagedFile f(final_path);
    std::ofstream(f.path()) << "half";
    ASSERT_TRUE(fs::exists(f.path()));
  }
  EXPECT_TRUE(dir.names().empty()) << dir.names().front();
}

TEST(StagedFile, WriteFileAtomicallyReplacesContent) {
  TempDir dir;
  const std::string path = (dir.path / "record.json").string();
  write_file_atomically(path, {"old"});
  EXPECT_EQ(read(path), "old");
  write_file_atomically(path, {"new", "", "er"});
  EXPECT_EQ(read(path), "newer");
  EXPECT_EQ(dir.names(), std::vector<std::string>{"record.json"}) << "no temporary left";
}

TEST(StagedFile, RunLayoutRecognisesStagedNames) {
  for (const std::string final_path : {"/run/tiles/x/tile-0000003.tif", "/run/checkpoints/last.pt", "rank-0.jsonl"}) {
    const fs::path staged = staged_path(final_path), with_ext = staged_path(final_path, ".tif");
    EXPECT_TRUE(RunLayout::is_temporary(staged.filename().string())) << staged;
    EXPECT_TRUE(RunLayout::is_temporary(with_ext.filename().string())) << with_ext;
    EXPECT_FALSE(RunLayout::is_temporary(fs::path(final_path).filename().string())) << final_path;
    EXPECT_EQ(staged.parent_path(), fs::path(final_path).parent_path()) << "staged beside the target (same file system)";
  }
  EXPECT_FALSE(RunLayout::telemetry_rank(fs::path(staged_path("rank-3.jsonl")).filename().string()));
}

}  // namespace
}  // namespace tessera
