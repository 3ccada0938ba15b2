#include "bench_common.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "child_process.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/layout_json.hpp"
#include "tessera/io/mosaic.hpp"
#include "tessera/run/run_writer.hpp"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;

// tessera-make-sample: beside the build's `tessera`, else from PATH.
std::string generator() {
  const fs::path self = fs::path(cli::self_executable()).parent_path();
  for (const fs::path& p : {self / "../sample_data/tessera-make-sample", self / "tessera-make-sample"})
    if (fs::exists(p)) return fs::canonical(p).string();
  return "tessera-make-sample";  // from PATH
}

}  // namespace

std::string source_file(const std::string& relative) { return std::string(TESSERA_SOURCE_DIR) + "/" + relative; }

std::string default_work_dir() { return (fs::temp_directory_path() / "tessera-bench").string(); }

std::string bench_scene(const std::string& work_dir, int64_t n) {
  const fs::path dir = fs::path(work_dir) / ("scene-" + std::to_string(n));
  const fs::path tif = dir / "scene.tif";
  if (!fs::exists(tif)) {
    std::fprintf(stderr, "bench: generating a %lld x %lld scene in %s\n", (long long)n, (long long)n, dir.c_str());
    auto r = cli::run_child({generator(), "--out", dir.string(), "--size", std::to_string(n), "--only", "scene"}, true);
    if (r.exit_code != 0) throw Error(dir.string() + ": scene generation failed");
  }
  return tif.string();
}

std::string bench_scene(const std::string& work_dir, const Index& extent) {
  TESSERA_CHECK(extent.size() == 2);
  if (extent[0] == extent[1]) return bench_scene(work_dir, extent[0]);
  const std::string square = bench_scene(work_dir, std::min(extent[0], extent[1]));
  const fs::path dir = fs::path(work_dir) / ("scene-" + std::to_string(extent[1]) + "x" + std::to_string(extent[0]));
  const fs::path vrt = dir / "scene.vrt";
  if (!fs::exists(vrt)) {
    fs::create_directories(dir);
    io::write_repeating_vrt(vrt.string(), square, extent);
  }
  return vrt.string();
}

std::string bench_ct(const std::string& work_dir, int64_t n) {
  const fs::path dir = fs::path(work_dir) / ("ct-" + std::to_string(n));
  const fs::path ct = dir / "ct.nii.gz";
  if (!fs::exists(ct)) {
    std::fprintf(stderr, "bench: generating a %lld^3 CT in %s\n", (long long)n, dir.c_str());
    auto r = cli::run_child({generator(), "--out", dir.string(), "--ct-size", std::to_string(n), "--only", "ct",
                             "--targets", "0"},
                            true);
    if (r.exit_code != 0) throw Error(dir.string() + ": CT generation failed");
  }
  return ct.string();
}

Index parse_extent(const std::string& flag, const std::string& text) {
  try {
    return engine::parse_image(text);
  } catch (const Error&) {
    throw Error(flag + ": '" + text + "' is not W×H (or W×H×D) with positive integers");
  }
}

std::string median_and_spread(const std::vector<double>& v, int decimals) {
  if (v.empty()) return "-";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return fmt::format("{:.{}f} ({:.{}f}-{:.{}f})", median_of(v), decimals, *lo, decimals, *hi, decimals);
}

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

void with_flag(const std::string& flag, const std::function<void()>& parse) {
  try {
    parse();
  } catch (const Error& e) {
    throw Error(flag + ": " + e.what());
  }
}

double mib(int64_t bytes) { return double(bytes) / double(1 << 20); }

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
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

}  // namespace tessera::bench
