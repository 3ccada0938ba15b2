#pragma once
// For tests that compare a parallel run's per-step losses with one process's.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tessera::test {

/// Largest relative difference |a[i] − b[i]| / |b[i]| of the per-step losses; +inf when the
/// step counts differ, there are none, or a loss is not finite (every step compared has
/// labelled pixels, so a finite loss is expected).
inline double max_relative_loss_difference(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
  }
  return worst;
}

}  // namespace tessera::test
