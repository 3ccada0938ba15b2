// run_child's peak memory of a Tessera child is the child's own, not wait4's, which starts
// from this process's high-water mark (posix_spawn runs the child on this memory until exec):
// a bench that has grown would report every smaller child as large as itself.
#include "child_process.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace tessera::cli {
namespace {

// Run as the child of the test below (TESSERA_TEST_TOUCH_MIB set): report the peak as
// tessera's main does, touch that many MiB, exit before any test runs.
const bool kRunAsChild = [] {
  const char* mib = std::getenv("TESSERA_TEST_TOUCH_MIB");
  if (!mib) return false;
  report_peak_rss_at_exit();
  std::vector<char> touched(size_t(std::atoi(mib)) << 20);
  std::memset(touched.data(), 1, touched.size());
  std::exit(touched[touched.size() / 2] == 1 ? 0 : 1);
}();

TEST(ChildProcess, ATesseraChildReportsItsOwnPeakNotThisProcesses) {
  ASSERT_FALSE(kRunAsChild);
  std::vector<char> big(size_t{768} << 20);  // this process's high-water mark: 768 MiB and more
  std::memset(big.data(), 1, big.size());
  setenv("TESSERA_TEST_TOUCH_MIB", "64", 1);
  const ChildResult r = run_child({self_executable()}, true);
  unsetenv("TESSERA_TEST_TOUCH_MIB");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_GT(r.peak_rss_mib, 64);  // the 64 MiB it touched, and its libraries
  EXPECT_LT(r.peak_rss_mib, 700) << "the child's peak includes this process's";
  EXPECT_EQ(big[12345], 1);
}

}  // namespace
}  // namespace tessera::cli
