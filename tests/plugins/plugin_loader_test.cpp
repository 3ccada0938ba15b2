// Loading plugins: discovery, the ABI check, and every way a file can be refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "tessera/core/error.hpp"
#include "tessera/core/model_registry.hpp"
#include "tessera/core/plugin_loader.hpp"

namespace fs = std::filesystem;

namespace tessera {
namespace {

const std::vector<std::string> kShippedModels = {"se-unet",  "test-cnn1d", "test-cnn2d", "test-cnn3d", "test-fcn2d",
                                                  "s0-unet",  "s0-small",   "s0-medium1", "s0-medium2", "s0-large"};

std::string load_error(ModelRegistry& r, const std::string& path) {
  try {
    load_plugin(r, path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no tessera::Error thrown)";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("tessera_plugin_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

TEST(PluginSearchPath, PluginPathEntriesFirstThenExecutableTreeThenInstallPrefix) {
  ::setenv("TESSERA_PLUGIN_PATH", "/opt/a::/opt/b:/opt/a", 1);
  const auto dirs = plugin_search_path();
  ::unsetenv("TESSERA_PLUGIN_PATH");
  ASSERT_GE(dirs.size(), 3u);
  EXPECT_EQ(dirs[0], "/opt/a");
  EXPECT_EQ(dirs[1], "/opt/b");  // the empty entry is skipped, the repeated /opt/a searched once
  EXPECT_NE(dirs[2], "/opt/a");
  EXPECT_TRUE(dirs.back().ends_with("lib/tessera/plugins")) << dirs.back();
  const auto exe_tree = fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "lib/tessera/plugins";
  EXPECT_NE(std::find(dirs.begin(), dirs.end(), exe_tree.string()), dirs.end());
}

TEST(PluginLoader, ShippedPluginsAreFoundThroughTesseraPluginPath) {
  ::setenv("TESSERA_PLUGIN_PATH", TESSERA_SHIPPED_PLUGIN_DIR, 1);
  ModelRegistry r;
  const size_t builtins = r.models().size();
  const PluginDiscovery found = load_plugins(r);
  ::unsetenv("TESSERA_PLUGIN_PATH");
  for (const auto& e : found.errors) ADD_FAILURE() << e;
  ASSERT_EQ(found.loaded.size(), 3u);
  for (const auto& name : kShippedModels) {
    ASSERT_TRUE(r.has_model(name)) << name;
    EXPECT_TRUE(contains(r.model(name).origin, TESSERA_SHIPPED_PLUGIN_DIR)) << r.model(name).origin;
    EXPECT_FALSE(r.model(name).description.empty());
  }
  EXPECT_EQ(r.models().size(), builtins + kShippedModels.size());
  EXPECT_EQ(r.model("se-unet").origin, fs::canonical(TESSERA_SE_UNET_PLUGIN).string());
}

TEST(PluginLoader, WrongAbiVersionIsRefusedBeforeInitRuns) {
  // bad_abi's init aborts the process: getting a clean exception proves init never ran.
  ModelRegistry r;
  const auto msg = load_error(r, TESSERA_BAD_ABI_PLUGIN);
  EXPECT_EQ(msg, std::string(TESSERA_BAD_ABI_PLUGIN) + ": plugin ABI version " +
                     std::to_string(TESSERA_PLUGIN_ABI_VERSION + 1) + ", this tessera expects " +
                     std::to_string(TESSERA_PLUGIN_ABI_VERSION) + " (rebuild the plugin against this tessera)");
  EXPECT_EQ(r.model_names(), ModelRegistry().model_names());
}

TEST(PluginLoader, MissingFileIsNamed) {
  ModelRegistry r;
  EXPECT_EQ(load_error(r, "/nonexistent/dir/se_unet.so"), "/nonexistent/dir/se_unet.so: no such plugin file");
}

TEST(PluginLoader, SharedLibraryWithoutEntryPointsIsNotAPlugin) {
  ModelRegistry r;
  EXPECT_EQ(load_error(r, TESSERA_NOT_A_PLUGIN),
            std::string(TESSERA_NOT_A_PLUGIN) + ": not a Tessera plugin (it exports no tessera_plugin_abi_version)");
}

TEST(PluginLoader, FileThatIsNotALibraryGivesTheLoaderReason) {
  TempDir dir;
  const auto junk = (dir.path() / "junk.so").string();
  std::ofstream(junk) << "this is not an ELF file\n";
  ModelRegistry r;
  const auto msg = load_error(r, junk);
  EXPECT_TRUE(msg.starts_with(junk + ": cannot load plugin: ")) << msg;
  EXPECT_TRUE(contains(msg, "junk.so")) << msg;  // dlerror's own text names it again
}

TEST(PluginLoader, TakenNameRefusesTheWholePlugin) {
  ModelRegistry r;
  const auto msg = load_error(r, TESSERA_DUPLICATE_PLUGIN);
  EXPECT_EQ(msg, std::string(TESSERA_DUPLICATE_PLUGIN) + ": model 'unet' is already registered (built-in)");
  // All or nothing: the plugin's two new names did not slip in before the clash.
  EXPECT_FALSE(r.has_model("duplicate-test-new-model"));
  EXPECT_FALSE(r.has_loss("duplicate-test-new-loss"));
  EXPECT_EQ(r.model("unet").origin, "built-in");
}

TEST(PluginLoader, SameFileTwiceIsRefusedAndSameNamesFromACopyToo) {
  ModelRegistry r;
  const LoadedPlugin first = load_plugin(r, TESSERA_TEST_NETWORKS_PLUGIN);
  EXPECT_EQ(first.models, (std::vector<std::string>{"test-cnn1d", "test-cnn2d", "test-cnn3d", "test-fcn2d"}));
  EXPECT_TRUE(contains(load_error(r, TESSERA_TEST_NETWORKS_PLUGIN), "plugin already loaded"));
  TempDir dir;
  const auto copy = dir.path() / "copy_of_test_networks.so";
  fs::copy_file(TESSERA_TEST_NETWORKS_PLUGIN, copy);
  EXPECT_EQ(load_error(r, copy.string()), copy.string() + ": model 'test-cnn1d' is already registered (" +
                                              fs::canonical(TESSERA_TEST_NETWORKS_PLUGIN).string() + ")");
}

TEST(PluginLoader, DiscoveryReportsARefusedPluginAndLoadsTheRest) {
  TempDir dir;
  fs::copy_file(TESSERA_BAD_ABI_PLUGIN, dir.path() / "a_bad_abi.so");
  fs::copy_file(TESSERA_TEST_NETWORKS_PLUGIN, dir.path() / "test_networks.so");
  std::ofstream(dir.path() / "README.txt") << "not a plugin, not a .so: ignored\n";
  ModelRegistry r;
  const auto found = load_plugins(r, {dir.path().string(), "/nonexistent/plugin/dir"});
  ASSERT_EQ(found.errors.size(), 1u);
  EXPECT_TRUE(contains(found.errors[0], "a_bad_abi.so: plugin ABI version")) << found.errors[0];
  ASSERT_EQ(found.loaded.size(), 1u);
  EXPECT_TRUE(r.has_model("test-fcn2d"));
}

TEST(PluginLoader, EarlierDirectoryShadowsAPluginOfTheSameFileName) {
  TempDir first, second;
  fs::copy_file(TESSERA_TEST_NETWORKS_PLUGIN, first.path() / "test_networks.so");
  fs::copy_file(TESSERA_TEST_NETWORKS_PLUGIN, second.path() / "test_networks.so");
  ModelRegistry r;
  const auto found = load_plugins(r, {first.path().string(), second.path().string()});
  EXPECT_TRUE(found.errors.empty()) << found.errors.front();
  ASSERT_EQ(found.loaded.size(), 1u);
  EXPECT_EQ(found.loaded[0].path, fs::canonical(first.path() / "test_networks.so").string());
}

TEST(PluginLoader, PluginLossAndPostProcessorAgreeWithAnIndependentComputation) {
  ModelRegistry r;
  const LoadedPlugin p = load_plugin(r, TESSERA_EXTRAS_PLUGIN);
  EXPECT_EQ(p.losses, std::vector<std::string>{"test-mean-square"});
  EXPECT_EQ(p.post_processors, std::vector<std::string>{"test-foreground"});
  // Two classes, one pixel each in two images: logits (0, ln 3) → p = (1/4, 3/4).
  auto logits = torch::zeros({2, 2, 1, 1});
  logits[0][1][0][0] = std::log(3.0);
  logits[1][1][0][0] = std::log(3.0);
  const auto target = torch::tensor({1, 0}, torch::kLong).view({2, 1, 1});
  // Image 0 (true 1): (1/4)² + (1/4)²; image 1 (true 0): (3/4)² + (3/4)²; mean over 4 terms.
  const double expected = (2 * 0.0625 + 2 * 0.5625) / 4;
  EXPECT_NEAR(r.loss("test-mean-square").loss(logits, target).item<double>(), expected, 1e-6);
  const auto fg = r.post_processor("test-foreground").process(logits);
  EXPECT_EQ(fg.sizes(), (std::vector<int64_t>{2, 1, 1}));
  EXPECT_NEAR(fg[0][0][0].item<double>(), 0.75, 1e-6);
  EXPECT_EQ(r.loss("test-mean-square").origin, fs::canonical(TESSERA_EXTRAS_PLUGIN).string());
}

}  // namespace
}  // namespace tessera
