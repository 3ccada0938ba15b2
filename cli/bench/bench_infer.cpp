// tessera bench infer: Tessera's streaming tiled inference against what a PyTorch user
// writes instead (bench/reference/sliding_window.py: MONAI-style sliding windows with
// Gaussian blending), in the same run, on the same scene, with the same weights (a
// checkpoint trained here for a few steps, exported for PyTorch), and how many labels the
// two agree on; the machine's measured 3×3 convolution peak; and peak memory at two scene
// sizes. Every figure is measured here and printed with the command that produced it.
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "bench_infer_options.hpp"
#include "child_process.hpp"
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
  for (int64_t n : memory_sizes)
    if (n < 1) throw Error("--memory-sizes: every side must be >= 1, got " + std::to_string(n));
  if (train_steps < 1) throw Error("--train-steps: must be >= 1, got " + std::to_string(train_steps));
  if (threads < 0) throw Error("--threads: must be >= 0 (0: all cores), got " + std::to_string(threads));
  try {
    parse_tile_option(small_tile);
  } catch (const Error&) {
    throw Error("--small-tile '" + small_tile + "': give 'auto' or a positive inset side in pixels");
  }
}

namespace {

namespace fs = std::filesystem;

// `tessera infer` arguments naming the network: a preset, randomly initialised (seed 0).
std::vector<std::string> random_model(const std::string& preset) {
  return {"--model", preset, "--init", "random", "--seed", "0", "--classes", "4"};
}

cli::ChildResult tessera_infer(const BenchInferOptions& f, const std::string& input,
                               const std::vector<std::string>& model, const std::string& tile, int threads,
                               const std::string& precision = "fp32", const std::string& output = "labels.tif") {
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

// Pixels whose labels equal in two single-band label rasters of one size, and their count
// (read through io::open_image, as tessera eval reads them; the bench's scenes are a few
// tens of MiB as labels).
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
constexpr int kRowLabel = 62;  // width of the tables' first column
constexpr const char* kReferenceRow = "PyTorch sliding window (MONAI-style, overlap 0.25, gaussian)";

// The reference on the scene with the bench model's weights: its own JSON line (seconds from
// loading the model to its labels written, peak RSS), its labels beside Tessera's.
nlohmann::json run_reference(const BenchInferOptions& f, const std::string& scene, const BenchModel& model,
                             int threads) {
  if (!fs::exists(f.ref_script))
    throw Error(f.ref_script + ": reference script not found (use --ref-script or --no-ref)");
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

// What follows `key` in infer's summary line, up to the next comma ("" when absent).
std::string summary_field(const std::string& out, const std::string& key) {
  const size_t at = out.find(key);
  return at == std::string::npos ? "" : out.substr(at, out.find_first_of(",\n", at) - at);
}

// The same network streamed (--mode stream): its row beside the tiles', labels compared.
void stream_row(const BenchInferOptions& f, const std::string& scene, const std::vector<std::string>& checkpoint,
                int threads, const cli::ChildResult& tiles, nlohmann::json& report) {
  const double px = double(f.size) * double(f.size);
  const cli::ChildResult s = tessera_infer(f, scene, checkpoint, "stream", threads, "fp32", "labels_stream.tif");
  const double g = unet_flops_per_output_pixel(unet_preset("unet-tiny")) * px / s.seconds / 1e9;
  const auto [equal, total] = equal_labels((fs::path(f.work_dir) / "labels.tif").string(),
                                           (fs::path(f.work_dir) / "labels_stream.tif").string());
  std::printf("%-*s %9.2f %9.3f %12.2f %12.1f  labels equal to tiles': %.4f%%, %.2fx their speed, %s, %s\n", kRowLabel,
              "tessera infer --mode stream", s.seconds, px / 1e6 / s.seconds, g, s.peak_rss_mib,
              100.0 * double(equal) / double(total), tiles.seconds / s.seconds, summary_field(s.out, "recompute").c_str(),
              summary_field(s.out, "strips of").c_str());
  report["tessera_stream"] = {{"seconds", s.seconds}, {"useful_gflops", g}, {"peak_rss_mib", s.peak_rss_mib},
                              {"labels_equal", equal}, {"pixels", total}};
}

// The speed comparison on the main scene: Tessera (fp32, bf16) and the reference, one network.
void compare_with_reference(const BenchInferOptions& f, int threads, nlohmann::json& report) {
  const double tiny_flops = unet_flops_per_output_pixel(unet_preset("unet-tiny"));
  const std::string main_scene = bench_scene(f.work_dir, f.size);
  const double px = double(f.size) * double(f.size);
  const BenchModel model = train_bench_model(f, main_scene, threads);
  const std::vector<std::string> checkpoint{"--checkpoint", model.checkpoint};
  std::printf("bench infer: %lld x %lld 4-band scene, unet-tiny (L4 f16, valid padding) trained %d steps at tile %lld "
              "(%.0f s), %d threads\n",
              (long long)f.size, (long long)f.size, f.train_steps, (long long)f.tile, model.train_seconds, threads);
  std::printf("%-*s %9s %9s %12s %12s\n", kRowLabel, "", "seconds", "Mpx/s", "useful GF/s", "peak RSS MiB");
  const cli::ChildResult t = tessera_infer(f, main_scene, checkpoint, std::to_string(f.tile), threads);
  const std::string tessera_labels = (fs::path(f.work_dir) / "labels.tif").string();
  const double t_gflops = tiny_flops * px / t.seconds / 1e9;
  std::printf("%-*s %9.2f %9.3f %12.2f %12.1f\n", kRowLabel, ("tessera infer --tile " + std::to_string(f.tile)).c_str(),
              t.seconds, px / 1e6 / t.seconds, t_gflops, t.peak_rss_mib);
  report["tessera"] = {{"seconds", t.seconds}, {"useful_gflops", t_gflops}, {"peak_rss_mib", t.peak_rss_mib},
                       {"tile", f.tile}, {"size", f.size}};
  report["model"] = {{"preset", "unet-tiny"}, {"train_steps", f.train_steps}, {"train_tile", f.tile},
                     {"checkpoint", model.checkpoint}, {"weights", model.weights}};
  if (f.bf16) {
    // The same network in bfloat16 (AVX-512 BF16 here), its labels against fp32's just written.
    const cli::ChildResult b =
        tessera_infer(f, main_scene, checkpoint, std::to_string(f.tile), threads, "bf16", "labels_bf16.tif");
    const double b_gflops = tiny_flops * px / b.seconds / 1e9;
    const auto [equal, total] = equal_labels(tessera_labels, (fs::path(f.work_dir) / "labels_bf16.tif").string());
    std::printf("%-*s %9.2f %9.3f %12.2f %12.1f  labels equal to fp32: %.4f%% (%lld differ), %.2fx fp32's speed\n",
                kRowLabel, "  the same, --precision bf16", b.seconds, px / 1e6 / b.seconds, b_gflops, b.peak_rss_mib,
                100.0 * double(equal) / double(total), (long long)(total - equal), t.seconds / b.seconds);
    report["tessera_bf16"] = {{"seconds", b.seconds}, {"useful_gflops", b_gflops}, {"peak_rss_mib", b.peak_rss_mib},
                              {"labels_equal", equal}, {"pixels", total}};
  }
  if (f.stream) stream_row(f, main_scene, checkpoint, threads, t, report);
  if (!f.ref) return;
  nlohmann::json j = run_reference(f, main_scene, model, threads);
  const double secs = j.at("seconds").get<double>(), rss = j.at("peak_rss_mib").get<double>();
  const double r_gflops = tiny_flops * px / secs / 1e9;
  const auto [equal, total] = equal_labels(tessera_labels, j.at("labels_path").get<std::string>());
  std::printf("%-*s %9.2f %9.3f %12.2f %12.1f  labels equal to tessera's: %.4f%% (%lld differ)\n", kRowLabel,
              kReferenceRow, secs, px / 1e6 / secs, r_gflops, rss, 100.0 * double(equal) / double(total),
              (long long)(total - equal));
  std::printf("  reference: %s, roi %lld (%lld input -> %lld output pixels per window), %lld windows\n",
              f.ref_script.c_str(), (long long)f.tile, j.value("window_input", 0LL), j.value("window_output", 0LL),
              j.value("windows", 0LL));
  std::printf("tessera / reference: %.2fx throughput, %.2fx peak memory\n", r_gflops > 0 ? t_gflops / r_gflops : 0.0,
              t.peak_rss_mib / rss);
  j.erase("labels_path");
  j.update({{"useful_gflops", r_gflops}, {"labels_equal", equal}, {"pixels", total}});
  report["reference"] = j;
  report["speedup"] = t_gflops / r_gflops;
  report["memory_ratio"] = t.peak_rss_mib / rss;
}

}  // namespace

void run_bench_infer(const BenchInferOptions& f) {
  f.validate();
  fs::create_directories(f.work_dir);
  const int threads = configure_threads(f.threads);
  nlohmann::json report{{"threads", threads}};
  compare_with_reference(f, threads, report);

  double peak = conv_peak_gflops();
  std::printf("\nconvolution peak (3x3, 64->64, 512^2): %.1f GFLOP/s\n", peak);
  report["conv_peak_gflops"] = peak;
  if (f.small) {
    const UNetOptions small = unet_preset("unet-small");
    const std::string s = bench_scene(f.work_dir, f.small_size);
    const cli::ChildResult r = tessera_infer(f, s, random_model("unet-small"), f.small_tile, threads);
    const double g = unet_flops_per_output_pixel(small) * double(f.small_size) * double(f.small_size) / r.seconds / 1e9;
    // The peak again after the run: this machine's speed drifts (shared host), and the
    // fraction is taken of the better of the two measurements (the conservative figure).
    const double after = conv_peak_gflops();
    std::printf("convolution peak again after unet-small: %.1f GFLOP/s\n", after);
    peak = std::max(peak, after);
    report["conv_peak_gflops"] = peak;
    std::printf("unet-small on %lld^2, --tile %s: %.1f s, %.1f useful GFLOP/s = %.0f%% of the convolution peak\n",
                (long long)f.small_size, f.small_tile.c_str(), r.seconds, g, 100.0 * g / peak);
    std::printf("  (%s)\n", summary_field(r.out, r.out.find("strips,") != std::string::npos ? "stream (" : "tiling overhead").c_str());
    report["unet_small"] = {{"seconds", r.seconds}, {"useful_gflops", g}, {"fraction_of_peak", g / peak},
                            {"size", f.small_size}, {"tile", f.small_tile}};
  }
  if (f.memory) {
    std::printf("\npeak memory vs scene size (unet-tiny, --tile %lld):\n", (long long)f.tile);
    nlohmann::json mem = nlohmann::json::array();
    double first = 0;
    for (int64_t n : f.memory_sizes) {
      const cli::ChildResult r =
          tessera_infer(f, bench_scene(f.work_dir, n), random_model("unet-tiny"), std::to_string(f.tile), threads);
      if (first == 0) first = r.peak_rss_mib;
      std::printf("  %6lld^2: %8.1f MiB  (%.2fx the first)\n", (long long)n, r.peak_rss_mib, r.peak_rss_mib / first);
      mem.push_back({{"size", n}, {"peak_rss_mib", r.peak_rss_mib}, {"seconds", r.seconds}});
      if (!f.stream) continue;
      const cli::ChildResult s =
          tessera_infer(f, bench_scene(f.work_dir, n), random_model("unet-tiny"), "stream", threads);
      std::printf("  %6lld^2: %8.1f MiB  --mode stream, %.2f s (%s; %s)\n", (long long)n, s.peak_rss_mib, s.seconds,
                  summary_field(s.out, "strips of").c_str(), summary_field(s.out, "carried").c_str());
      mem.back()["stream_peak_rss_mib"] = s.peak_rss_mib;
      mem.back()["stream_seconds"] = s.seconds;
    }
    report["memory"] = mem;
  }
  std::cout << "\n" << report.dump() << std::endl;
}

}  // namespace tessera::bench
