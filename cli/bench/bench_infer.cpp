// tessera bench infer: Tessera's streaming tiled inference against what a PyTorch user
// writes instead (bench/reference/sliding_window.py: MONAI-style sliding windows with
// Gaussian blending), in the same run, on the same scene, with the same weights (a
// checkpoint trained here for a few steps, exported for PyTorch), and how many labels the
// two agree on, each tool run --runs times interleaved (Tessera, reference, Tessera, …) and
// printed as the median and the spread; the machine's measured 3×3 convolution peak; peak
// memory per scene beside the stream's predicted footprint and a volume streamed against tiles
// (bench_infer_scenes.cpp). Every figure is measured here and printed with the command that
// produced it.
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "bench_infer_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/tile_choice.hpp"
#include "tessera/core/unet_spec.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/run/run_layout.hpp"

namespace tessera::bench {

void BenchInferOptions::validate() const {
  for (const auto& [flag, value] : {std::pair{"--size", size}, {"--tile", tile}, {"--small-size", small_size}})
    if (value < 1) throw Error(std::string(flag) + ": must be >= 1, got " + std::to_string(value));
  for (const std::string& scene : memory_scenes)
    if (parse_extent("--memory-scenes", scene).size() != 2)
      throw Error("--memory-scenes: '" + scene + "' is not a 2-D scene W×H");
  if (runs < 1) throw Error("--runs: must be >= 1, got " + std::to_string(runs));
  if (volume < 0) throw Error("--volume: must be >= 0 (0: skip), got " + std::to_string(volume));
  if (volume > 0 && unet_preset(volume_model).dims != 3)
    throw Error("--volume-model " + volume_model + ": not a 3-D preset");
  if (train_steps < 1) throw Error("--train-steps: must be >= 1, got " + std::to_string(train_steps));
  if (threads < 0) throw Error("--threads: must be >= 0 (0: all cores), got " + std::to_string(threads));
  try {
    parse_tile_option(small_tile);
  } catch (const Error&) {
    throw Error("--small-tile '" + small_tile + "': give 'auto' or a positive inset side in pixels");
  }
}

namespace fs = std::filesystem;

std::vector<std::string> random_model(const std::string& preset, int classes) {
  return {"--model", preset, "--init", "random", "--seed", "0", "--classes", std::to_string(classes)};
}

cli::ChildResult tessera_infer(const BenchInferOptions& f, const std::string& input,
                               const std::vector<std::string>& model, const std::string& tile, int threads,
                               const std::string& precision, const std::string& output) {
  const std::string out = (fs::path(f.work_dir) / output).string();
  std::vector<std::string> argv{cli::self_executable(), "infer"};
  argv.insert(argv.end(), model.begin(), model.end());
  // tile "stream": --mode stream (strips, no tiles); otherwise tiles of that side.
  if (tile == "stream") argv.insert(argv.end(), {"--mode", "stream"});
  else argv.insert(argv.end(), {"--mode", "tile", "--tile", tile});
  argv.insert(argv.end(), {"--input", input, "--output", out, "--threads", std::to_string(threads), "--precision",
                           precision, "--no-progress"});
  auto r = cli::run_child(argv, true);
  if (r.exit_code != 0)
    throw Error("bench: tessera infer failed on " + input + " (exit " + std::to_string(r.exit_code) + ")");
  return r;
}

std::pair<int64_t, int64_t> equal_labels(const std::string& a, const std::string& b) {
  const auto ia = io::open_image(a), ib = io::open_image(b);
  const Index& extent = ia->info().extent;
  if (ib->info().extent != extent) throw Error(b + ": not the size of " + a);
  const Box whole{Index(extent.size(), 0), extent};
  const Block<float> la = ia->read(whole), lb = ib->read(whole);
  int64_t equal = 0;
  for (size_t i = 0; i < la.data.size(); ++i) equal += la.data[i] == lb.data[i];
  return {equal, static_cast<int64_t>(la.data.size())};
}

std::string summary_field(const std::string& out, const std::string& key) {
  // The summary's own field follows ", " (a reason in parentheses may use the same words:
  // "tiles of 32 would recompute 6.25x").
  size_t at = out.find(", " + key);
  at = at == std::string::npos ? out.find(key) : at + 2;
  return at == std::string::npos ? "" : out.substr(at, out.find_first_of(",\n", at) - at);
}

namespace {

// The network both tools run: unet-tiny (`valid` padding) trained for a few steps on the
// scene at --tile (so its labels vary, and the agreement below means something), its
// checkpoint for Tessera and `tessera export`'s model.pt / model.json for PyTorch.
struct BenchModel {
  std::string checkpoint, weights;
  double train_seconds = 0;
};

BenchModel train_bench_model(const BenchInferOptions& f, const std::string& scene, int threads) {
  const fs::path dir = fs::path(f.work_dir) / "infer-model";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path config = dir / "train.yaml";
  std::ofstream(config) << "model: {preset: unet-tiny, classes: 4}\n"
                        << "data:\n  pairs: [{image: " << scene
                        << ", labels: " << (fs::path(scene).parent_path() / "scene_labels.tif").string() << "}]\n"
                        << "train: {tile: " << f.tile << ", batch: 2, steps: " << f.train_steps
                        << ", learning_rate: 0.003, seed: 0, augment: false, checkpoint_every: " << f.train_steps
                        << "}\n";
  const RunLayout run((dir / "run").string());
  const cli::ChildResult t = cli::run_child({cli::self_executable(), "train", "--config", config.string(), "--run-dir",
                                             run.dir(), "--threads", std::to_string(threads), "--no-progress"},
                                            true);
  if (t.exit_code != 0)
    throw Error("bench: tessera train of the bench model failed (exit " + std::to_string(t.exit_code) + ")");
  BenchModel m{run.last_checkpoint(), (dir / "model.pt").string(), t.seconds};
  const cli::ChildResult e =
      cli::run_child({cli::self_executable(), "export", "--checkpoint", m.checkpoint, "--out", m.weights}, true);
  if (e.exit_code != 0)
    throw Error("bench: tessera export of " + m.checkpoint + " failed (exit " + std::to_string(e.exit_code) + ")");
  return m;
}

// GFLOP/s of a large 3×3 convolution (64 → 64 channels, 512²), best of ten, in the faster of
// the two layouts (channels-last, which Tessera's networks use, runs oneDNN's brgconv: about
// 1.4× NCHW here; a peak measured in NCHW alone understates the machine).
double conv_peak_gflops() {
  torch::NoGradGuard ng;
  double best = 1e30;
  for (const auto format : {torch::MemoryFormat::Contiguous, torch::MemoryFormat::ChannelsLast}) {
    const auto x = torch::randn({1, 64, 512, 512}).contiguous(format);
    const auto w = torch::randn({64, 64, 3, 3}).contiguous(format);
    torch::conv2d(x, w);
    for (int i = 0; i < 10; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      torch::conv2d(x, w);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  return 2.0 * 9 * 64 * 64 * 510.0 * 510.0 / best / 1e9;
}

constexpr const char* kPython = "/usr/bin/python3";  // runs the reference
constexpr const char* kReferenceRow = "PyTorch sliding window (MONAI-style, overlap 0.25, gaussian)";

// The reference on the scene with the bench model's weights: its own JSON line (seconds from
// loading the model to its labels written, peak RSS), its labels beside Tessera's.
nlohmann::json run_reference(const BenchInferOptions& f, const std::string& scene, const BenchModel& model,
                             int threads) {
  const std::string labels = (fs::path(f.work_dir) / "labels_reference.tif").string();
  const cli::ChildResult r =
      cli::run_child({kPython, f.ref_script, scene, "--weights", model.weights, "--roi", std::to_string(f.tile),
                      "--overlap", "0.25", "--threads", std::to_string(threads), "--labels", labels},
                     true);
  if (r.exit_code != 0)
    throw Error(f.ref_script + ": failed (exit " + std::to_string(r.exit_code) +
                "); it needs python3-torch, python3-rasterio and python3-numpy");
  nlohmann::json j = cli::last_json(r.out, f.ref_script);
  j["script"] = f.ref_script;
  j["labels_path"] = labels;
  return j;
}

// One row of the speed table: every run's seconds and peak RSS, printed as the median and
// the spread (min-max) of each figure; the last run's output kept for its summary line.
struct RowRuns {
  std::vector<double> seconds, rss_mib;
  std::string out;
  void add(double s, double rss, std::string text = "") {
    seconds.push_back(s);
    rss_mib.push_back(rss);
    out = std::move(text);
  }
  void add(const cli::ChildResult& r) { add(r.seconds, r.peak_rss_mib, r.out); }
  double median_seconds() const { return median_of(seconds); }
  double median_rss() const { return median_of(rss_mib); }
  // Mpx/s or useful GFLOP/s of every run: `per_second` / its seconds.
  std::vector<double> rates(double per_second) const {
    std::vector<double> r;
    for (double s : seconds) r.push_back(per_second / s);
    return r;
  }
  void print(const std::string& label, double px, double flops_per_px, const std::string& note = "") const {
    std::printf("%-*s %20s %20s %22s %22s%s\n", kRowLabel, label.c_str(), median_and_spread(seconds, 2).c_str(),
                median_and_spread(rates(px / 1e6), 3).c_str(), median_and_spread(rates(flops_per_px * px / 1e9), 2).c_str(),
                median_and_spread(rss_mib, 1).c_str(), note.c_str());
  }
  nlohmann::json json(double px, double flops_per_px) const {
    return {{"seconds", median_seconds()}, {"useful_gflops", flops_per_px * px / 1e9 / median_seconds()},
            {"peak_rss_mib", median_rss()}, {"runs_seconds", seconds}, {"runs_peak_rss_mib", rss_mib}};
  }
};

// What one speed comparison measured: Tessera's tiles, bf16 and stream rows, the reference's.
struct SpeedRows {
  RowRuns tiles, bf16, stream, reference;
  nlohmann::json reference_json;  // the last reference run's own line
};

// Round `k` of the interleaved runs: Tessera's tiles, the reference, the stream, bf16.
void run_round(const BenchInferOptions& f, const std::string& scene, const BenchModel& model, int threads,
               SpeedRows& rows) {
  const std::vector<std::string> checkpoint{"--checkpoint", model.checkpoint};
  rows.tiles.add(tessera_infer(f, scene, checkpoint, std::to_string(f.tile), threads));
  if (f.ref) {
    rows.reference_json = run_reference(f, scene, model, threads);
    rows.reference.add(rows.reference_json.at("seconds").get<double>(), rows.reference_json.at("peak_rss_mib").get<double>());
  }
  if (f.stream) rows.stream.add(tessera_infer(f, scene, checkpoint, "stream", threads, "fp32", "labels_stream.tif"));
  if (f.bf16)
    rows.bf16.add(tessera_infer(f, scene, checkpoint, std::to_string(f.tile), threads, "bf16", "labels_bf16.tif"));
}

// "labels equal to <what>: 99.9876% (12 differ)" for the labels at `b` against `a`.
std::string agreement(const std::string& a, const std::string& b, const std::string& what, nlohmann::json& row) {
  const auto [equal, total] = equal_labels(a, b);
  row["labels_equal"] = equal;
  row["pixels"] = total;
  return fmt::format("  labels equal to {}: {:.4f}% ({} differ)", what, 100.0 * double(equal) / double(total),
                     total - equal);
}

// The rows after the runs, each the median and spread; agreements of the last run's labels.
void print_speed_rows(const BenchInferOptions& f, const SpeedRows& rows, nlohmann::json& report) {
  const double px = double(f.size) * double(f.size), flops = unet_flops_per_output_pixel(unet_preset("unet-tiny"));
  const fs::path dir(f.work_dir);
  const std::string tiles_labels = (dir / "labels.tif").string();
  rows.tiles.print("tessera infer --tile " + std::to_string(f.tile), px, flops);
  report["tessera"] = rows.tiles.json(px, flops);
  report["tessera"].update({{"tile", f.tile}, {"size", f.size}});
  if (f.bf16) {
    report["tessera_bf16"] = rows.bf16.json(px, flops);
    rows.bf16.print("  the same, --precision bf16", px, flops,
                    agreement(tiles_labels, (dir / "labels_bf16.tif").string(), "fp32", report["tessera_bf16"]));
  }
  if (f.stream) {
    report["tessera_stream"] = rows.stream.json(px, flops);
    const std::string note = agreement(tiles_labels, (dir / "labels_stream.tif").string(), "tiles'", report["tessera_stream"]);
    rows.stream.print("tessera infer --mode stream", px, flops, note);
    std::printf("  stream: %s, %s\n", summary_field(rows.stream.out, "recompute ").c_str(),
                summary_field(rows.stream.out, "strips of").c_str());
  }
  if (!f.ref) return;
  nlohmann::json j = rows.reference_json;
  const std::string note = agreement(tiles_labels, j.at("labels_path").get<std::string>(), "tessera's", j);
  rows.reference.print(kReferenceRow, px, flops, note);
  std::printf("  reference: %s, roi %lld (%lld input -> %lld output pixels per window), %lld windows\n",
              f.ref_script.c_str(), (long long)f.tile, j.value("window_input", 0LL), j.value("window_output", 0LL),
              j.value("windows", 0LL));
  j.erase("labels_path");
  j.update(rows.reference.json(px, flops));
  report["reference"] = j;
  const double ref_s = rows.reference.median_seconds(), ref_rss = rows.reference.median_rss();
  std::printf("tessera / reference (medians): tiles %.2fx throughput, %.2fx peak memory", ref_s / rows.tiles.median_seconds(),
              rows.tiles.median_rss() / ref_rss);
  if (f.stream)
    std::printf("; stream %.2fx throughput, %.2fx peak memory", ref_s / rows.stream.median_seconds(),
                rows.stream.median_rss() / ref_rss);
  std::printf("\n");
  report["speedup"] = ref_s / rows.tiles.median_seconds();
  report["memory_ratio"] = rows.tiles.median_rss() / ref_rss;
  if (f.stream) {
    report["stream_speedup"] = ref_s / rows.stream.median_seconds();
    report["stream_memory_ratio"] = rows.stream.median_rss() / ref_rss;
  }
}

// The speed comparison on the main scene: Tessera (tiles, stream, bf16) and the reference,
// one network, --runs rounds interleaved.
void compare_with_reference(const BenchInferOptions& f, int threads, nlohmann::json& report) {
  if (f.ref && !fs::exists(f.ref_script))
    throw Error(f.ref_script + ": reference script not found (use --ref-script or --no-ref)");
  const std::string main_scene = bench_scene(f.work_dir, f.size);
  const BenchModel model = train_bench_model(f, main_scene, threads);
  std::printf("bench infer: %lld x %lld 4-band scene, unet-tiny (L4 f16, valid padding) trained %d steps at tile %lld "
              "(%.0f s), %d threads, %d interleaved runs (median (min-max))\n",
              (long long)f.size, (long long)f.size, f.train_steps, (long long)f.tile, model.train_seconds, threads, f.runs);
  SpeedRows rows;
  for (int k = 0; k < f.runs; ++k) run_round(f, main_scene, model, threads, rows);
  std::printf("%-*s %20s %20s %22s %22s\n", kRowLabel, "", "seconds", "Mpx/s", "useful GF/s", "peak RSS MiB");
  report["model"] = {{"preset", "unet-tiny"}, {"train_steps", f.train_steps}, {"train_tile", f.tile},
                     {"checkpoint", model.checkpoint}, {"weights", model.weights}};
  report["runs"] = f.runs;
  print_speed_rows(f, rows, report);
}

// unet-small at --small-size, --runs times: the median's fraction of the convolution peak
// (measured before and after, the better of the two: this machine's speed drifts).
void small_rows(const BenchInferOptions& f, int threads, double peak, nlohmann::json& report) {
  const UNetOptions small = unet_preset("unet-small");
  const std::string s = bench_scene(f.work_dir, f.small_size);
  RowRuns runs;
  for (int k = 0; k < f.runs; ++k) runs.add(tessera_infer(f, s, random_model("unet-small"), f.small_tile, threads));
  const double after = conv_peak_gflops();
  std::printf("convolution peak again after unet-small: %.1f GFLOP/s\n", after);
  peak = std::max(peak, after);
  report["conv_peak_gflops"] = peak;
  const double px = double(f.small_size) * double(f.small_size);
  const double g = unet_flops_per_output_pixel(small) * px / runs.median_seconds() / 1e9;
  std::printf("unet-small on %lld^2, --tile %s: %s s, %s useful GFLOP/s, median = %.0f%% of the convolution peak\n",
              (long long)f.small_size, f.small_tile.c_str(), median_and_spread(runs.seconds, 1).c_str(),
              median_and_spread(runs.rates(unet_flops_per_output_pixel(small) * px / 1e9), 1).c_str(), 100.0 * g / peak);
  std::printf("  (%s)\n", summary_field(runs.out, runs.out.find("strips,") != std::string::npos ? "stream (" : "tiling overhead").c_str());
  report["unet_small"] = runs.json(px, unet_flops_per_output_pixel(small));
  report["unet_small"].update({{"fraction_of_peak", g / peak}, {"size", f.small_size}, {"tile", f.small_tile}});
}

}  // namespace

void run_bench_infer(const BenchInferOptions& f) {
  f.validate();
  fs::create_directories(f.work_dir);
  const int threads = configure_threads(f.threads);
  nlohmann::json report{{"threads", threads}};
  if (f.speed) compare_with_reference(f, threads, report);
  // Before this process measures the convolution peak: a child's ru_maxrss starts from this
  // process's high-water RSS (posix_spawn shares its memory until exec), and the peak's
  // tensors would raise it above a small scene's whole run.
  if (f.memory) memory_rows(f, threads, report);
  if (f.volume > 0) volume_rows(f, threads, report);

  const double peak = conv_peak_gflops();
  std::printf("\nconvolution peak (3x3, 64->64, 512^2): %.1f GFLOP/s\n", peak);
  report["conv_peak_gflops"] = peak;
  if (f.small) small_rows(f, threads, peak, report);
  std::cout << "\n" << report.dump() << std::endl;
}

}  // namespace tessera::bench
