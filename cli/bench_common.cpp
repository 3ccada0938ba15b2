#include "bench_common.hpp"

#include <algorithm>

#include "tessera/run/run_writer.hpp"

namespace tessera::cli {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double median_step_seconds(const std::string& metrics_path) {
  return median_step_seconds(read_metrics(metrics_path).steps);
}

double median_step_seconds(const std::vector<StepMetrics>& metrics) {
  std::vector<double> elapsed;
  for (const StepMetrics& m : metrics) elapsed.push_back(m.elapsed_s);
  std::vector<double> steps;
  for (size_t i = 1; i < elapsed.size(); ++i) steps.push_back(elapsed[i] - elapsed[i - 1]);
  return median_of(steps);
}

int64_t largest_fitting(int64_t start, int64_t j_max, const std::function<bool(int64_t)>& fits) {
  // Invariant: fits(lo) (or lo = −1, below the range), !fits(hi) (or hi = j_max + 1, beyond it).
  int64_t lo = -1, hi = j_max + 1;
  if (fits(start)) {
    lo = start;
    for (int64_t stride = 1; lo < j_max; stride *= 2) {
      const int64_t j = std::min(j_max, lo + stride);
      if (!fits(j)) {
        hi = j;
        break;
      }
      lo = j;
    }
  } else {
    hi = start;
    for (int64_t stride = 1; hi > 0; stride *= 2) {
      const int64_t j = std::max<int64_t>(0, hi - stride);
      if (fits(j)) {
        lo = j;
        break;
      }
      hi = j;
    }
  }
  while (lo >= 0 && hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace tessera::cli
