#pragma once
// What the comparisons with published figures share (seed_figures_test.cpp,
// held_out_figures_test.cpp): the shipped cluster files, the 30 % bound, and one printed line
// per figure — published, simulated, error — whose error the caller checks.
#include <cstdio>
#include <filesystem>

namespace tessera::test {

inline const std::filesystem::path kClusters = std::filesystem::path(TESSERA_SOURCE_DIR) / "clusters";
constexpr double kTolerance = 0.30;

/// Prints the figure and returns the relative error (simulated − published) / published.
inline double report(const char* what, double published, double simulated, const char* unit) {
  const double error = (simulated - published) / published;
  std::printf("  %-62s published %9.3f %-3s simulated %9.3f %-3s error %+6.1f%%\n", what, published, unit, simulated,
              unit, 100 * error);
  return error;
}

}  // namespace tessera::test
