#pragma once
// Shared by the `tessera bench …` drivers: the generated scenes and CT, the measured side search,
// medians of step times, and the small formatting helpers of their tables. Torch-free.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/geometry.hpp"
#include "tessera/core/train_observer.hpp"

namespace tessera::bench {

/// A file of the source tree (the PyTorch references, cluster descriptions): `relative`
/// below the checkout this binary was built from.
std::string source_file(const std::string& relative);

/// The benches' default work folder: <temporary directory>/tessera-bench.
std::string default_work_dir();

/// A deterministic 4-band scene of side n (tessera-make-sample), generated once into
/// work_dir/scene-n/ and reused; returns the GeoTIFF's path.
std::string bench_scene(const std::string& work_dir, int64_t n);

/// A 4-band scene of `extent` (rows, columns): bench_scene's square one when the sides are
/// equal, else a VRT (io/mosaic.hpp, write_repeating_vrt) repeating the square scene of the
/// shorter side down or across, written once into work_dir/scene-<W>x<H>/. Its path.
std::string bench_scene(const std::string& work_dir, const Index& extent);

/// A synthetic CT of n³ voxels (tessera-make-sample --ct-size n), generated once into
/// work_dir/ct-n/; returns the volume's path.
std::string bench_ct(const std::string& work_dir, int64_t n);

/// "W×H" (or W×H×D) into an Index (rows first), as `tessera plan --image` takes it; the error
/// names `flag`.
Index parse_extent(const std::string& flag, const std::string& text);

/// The median of `v` and its spread: "2.31 (2.20–2.50)" with `decimals`.
std::string median_and_spread(const std::vector<double>& v, int decimals);

/// The largest j in [0, j_max] with fits(j), for a `fits` that holds up to some j and fails
/// beyond (a memory cap against a growing side), measured with few probes: from the
/// prediction `start`, strides doubling away from it until the answer is bracketed, then
/// bisection. −1 when not even j = 0 fits. Every probe is a call of `fits` (collective in the
/// benches: every rank calls with the same j).
int64_t largest_fitting(int64_t start, int64_t j_max, const std::function<bool(int64_t)>& fits);

/// The median of `v` (the upper one for an even count); 0 for none.
double median_of(std::vector<double> v);

/// Median seconds per step of a finished run's metrics.jsonl (elapsed_s differences; the
/// first step, which includes start-up, left out as PyTorch references do).
double median_step_seconds(const std::string& metrics_path);
/// The same of steps already read (read_metrics(path).steps).
double median_step_seconds(const std::vector<StepMetrics>& steps);

/// Runs `parse` (a parse_* of a flag's text); a tessera::Error it throws is thrown again with
/// `flag` in front ("--schedule: …"), so that validate() names the flag.
void with_flag(const std::string& flag, const std::function<void()>& parse);

/// Bytes as MiB.
double mib(int64_t bytes);

/// "1,2,4": a list as a flag value.
std::string join(const std::vector<int>& v);

}  // namespace tessera::bench
