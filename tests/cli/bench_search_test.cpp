// The benches' measured search (bench_common.hpp largest_fitting): for every range, every
// boundary (nothing fits, some prefix fits, everything fits) and every starting prediction,
// it returns the last j that fits, never probes outside [0, j_max], and needs few probes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "bench_common.hpp"

namespace tessera::bench {
namespace {

TEST(BenchSearch, FindsTheLastFittingStepFromAnyPrediction) {
  for (int64_t j_max = 0; j_max <= 40; ++j_max)
    for (int64_t last = -1; last <= j_max; ++last)
      for (int64_t start = 0; start <= j_max; ++start) {
        int probes = 0;
        bool outside = false;
        const int64_t got = largest_fitting(start, j_max, [&](int64_t j) {
          ++probes;
          outside = outside || j < 0 || j > j_max;
          return j <= last;
        });
        const std::string what = "j_max " + std::to_string(j_max) + ", last fitting " + std::to_string(last) +
                                 ", start " + std::to_string(start);
        EXPECT_EQ(got, last) << what;
        EXPECT_FALSE(outside) << what;
        // Doubling away from the start, then bisecting the bracket: about 2 log2 of the distance.
        const double distance = double(std::abs(last - start)) + 2;
        EXPECT_LE(probes, 2 * std::ceil(std::log2(distance)) + 2) << what;
      }
}

}  // namespace
}  // namespace tessera::bench
