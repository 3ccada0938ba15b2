// tessera bench train: data-parallel training speed against PyTorch DistributedDataParallel
// (bench/reference/ddp_train.py, gloo on CPU), the tool users would pick instead. Same U-Net
// (L4, n_c 2, f16, `same` padding, 4 bands, 4 classes), same scene, tile, ranks, global
// batch, steps, optimiser (Adam, lr 1e-3) and loss (Dice + cross-entropy), measured in the
// same run, the two tools interleaved.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "bench_train_options.hpp"
#include "child_process.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/run/run_writer.hpp"

namespace tessera::bench {

void BenchTrainOptions::validate() const {
  for (const auto& [flag, value] : {std::pair{"--ranks", ranks}, {"--steps", steps}, {"--repeats", repeats},
                                    {"--global-batch", global_batch}, {"--threads", threads}})
    if (value < 1) throw Error(std::string(flag) + ": must be >= 1, got " + std::to_string(value));
  if (global_batch % ranks != 0) throw Error("--global-batch must be a multiple of --ranks");
  if (tile < 1 || scene_size < 1) throw Error("--tile and --scene-size must be >= 1");
}

namespace {

namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";  // runs the reference

// One `tessera train` run under mpirun: its median seconds per step and, from the same
// metrics.jsonl, the gradient communication of its steps after the first (data parallel).
struct TesseraRun {
  double step_seconds = 0;
  int communication_steps = 0;       ///< steps with a communication record (0: one rank)
  double busy_ms = 0, exposed_ms = 0;  ///< medians over those steps
  double hidden_share = 0;           ///< Σ hidden / Σ busy over them
  int buckets = 0, overlapped = 0;   ///< the last step's buckets and those posted during its backward
  nlohmann::json to_json() const {
    return {{"steps", communication_steps}, {"busy_ms", busy_ms}, {"hidden_share", hidden_share},
            {"exposed_ms", exposed_ms}, {"buckets", buckets}, {"overlapped", overlapped}};
  }
};

TesseraRun tessera_run(const BenchTrainOptions& f, const fs::path& config, const fs::path& run) {
  fs::remove_all(run);
  std::vector<std::string> args{"train", "--config", config.string(), "--run-dir", run.string(), "--no-progress"};
  if (f.ranks == 1) args.insert(args.end(), {"--threads", std::to_string(f.threads)});
  cli::run_ranks(f.mpirun, f.ranks, args, "bench train: tessera train");
  const std::vector<StepMetrics> steps = read_metrics(RunLayout(run.string()).metrics()).steps;
  TesseraRun r;
  r.step_seconds = median_step_seconds(steps);
  std::vector<double> busy, exposed;
  double hidden = 0, busy_total = 0;
  for (size_t k = 1; k < steps.size(); ++k)  // the first step warms up, as for the step time
    if (const std::optional<StepCommunication>& c = steps[k].communication) {
      busy.push_back(1e3 * c->busy_s);
      exposed.push_back(1e3 * c->exposed_s);
      hidden += c->hidden_s;
      busy_total += c->busy_s;
      r.buckets = c->buckets;
      r.overlapped = c->overlapped;
    }
  r.communication_steps = static_cast<int>(busy.size());
  if (!busy.empty()) {
    r.busy_ms = median_of(busy);
    r.exposed_ms = median_of(exposed);
    r.hidden_share = busy_total > 0 ? hidden / busy_total : 0;
  }
  return r;
}

// One run of the reference on the same scene and labels; its median DDP step seconds.
double reference_step_seconds(const BenchTrainOptions& f, const std::string& scene, const std::string& labels) {
  const cli::ChildResult r = cli::run_child(
      {kPython, f.ref_script, "--image", scene, "--labels", labels, "--ranks", std::to_string(f.ranks), "--tile",
       std::to_string(f.tile), "--global-batch", std::to_string(f.global_batch), "--steps", std::to_string(f.steps),
       "--threads", std::to_string(f.threads), "--lr", "0.001"},
      true);
  if (r.exit_code != 0)
    throw Error(f.ref_script + ": failed (exit " + std::to_string(r.exit_code) +
                "); it needs python3-torch, python3-rasterio and python3-numpy");
  return cli::last_json(r.out, f.ref_script).at("step_s_ddp").get<double>();
}

fs::path write_config(const BenchTrainOptions& f, const fs::path& run_dir, const std::string& scene,
                      const std::string& labels, const std::string& precision) {
  const fs::path config = run_dir / ("bench-" + precision + ".yaml");
  std::ofstream y(config);
  y << "model: {preset: unet-tiny, padding: same, classes: 4}\n"
    << "data:\n  pairs: [{image: " << scene << ", labels: " << labels << "}]\n"
    << "train: {tile: " << f.tile << ", batch: " << f.global_batch / f.ranks << ", steps: " << f.steps
    << ", learning_rate: 0.001, seed: 0, augment: false, precision: " << precision
    << ", checkpoint_every: " << f.steps + 1 << "}\n";
  return config;
}

// Every repeat's median step of each tool (fp32, bf16, the reference) and Tessera's
// communication timeline.
struct Runs {
  std::vector<double> ours, ours_bf16, theirs;
  nlohmann::json communication = nlohmann::json::array();
};

// The two tools alternate, so a noisy neighbour on the machine slows both alike.
Runs interleaved_runs(const BenchTrainOptions& f, const fs::path& run_dir, const std::string& scene, const std::string& labels) {
  const fs::path config = write_config(f, run_dir, scene, labels, "fp32");
  const fs::path config_bf16 = write_config(f, run_dir, scene, labels, "bf16");
  Runs r;
  for (int k = 0; k < f.repeats; ++k) {
    const TesseraRun run = tessera_run(f, config, run_dir / "run");
    r.ours.push_back(run.step_seconds);
    r.communication.push_back(run.to_json());
    std::printf("  repeat %d: tessera %.4f s/step", k + 1, r.ours.back());
    if (f.bf16) {
      r.ours_bf16.push_back(tessera_run(f, config_bf16, run_dir / "run").step_seconds);
      std::printf(", tessera bf16 %.4f s/step", r.ours_bf16.back());
    }
    if (f.ref) {
      r.theirs.push_back(reference_step_seconds(f, scene, labels));
      std::printf(", DDP %.4f s/step", r.theirs.back());
    }
    std::printf("\n");
    if (run.communication_steps > 0)
      std::printf("    tessera gradients (metrics.jsonl, median of %d steps): %d buckets, %d posted during the backward; "
                  "communication %.2f ms per step, %.0f%% of it hidden behind the backward, %.2f ms waited after it\n",
                  run.communication_steps, run.buckets, run.overlapped, run.busy_ms, 100 * run.hidden_share,
                  run.exposed_ms);
    std::fflush(stdout);
  }
  return r;
}

// One row of the table: the best run (least disturbed: Python's timeit convention) and the
// median run, which is the headline figure; its JSON.
nlohmann::json result_row(const BenchTrainOptions& f, const char* label, const std::vector<double>& runs) {
  const double best = *std::min_element(runs.begin(), runs.end()), median = median_of(runs);
  std::printf("%-40s %12.4f %12.2f %12.4f\n", label, best, f.global_batch / best, median);
  return {{"step_s", best}, {"median_step_s", median}, {"tiles_per_s", f.global_batch / best}, {"runs", runs}};
}

nlohmann::json print_results(const BenchTrainOptions& f, const Runs& r) {
  std::printf("%-40s %12s %12s %12s\n", "", "best s/step", "tiles/s", "median s/step");
  nlohmann::json report{{"ranks", f.ranks}, {"tile", f.tile}, {"global_batch", f.global_batch}, {"repeats", f.repeats}};
  report["tessera"] = result_row(f, "tessera train (data parallel, MPI)", r.ours);
  report["tessera"]["communication"] = r.communication;
  if (f.bf16) report["tessera_bf16"] = result_row(f, "tessera train, precision bf16 (mixed)", r.ours_bf16);
  if (!f.ref) return report;
  report["reference"] = result_row(f, "PyTorch DDP (gloo, CPU), reference", r.theirs);
  const double t_med = median_of(r.ours), r_med = median_of(r.theirs);
  const double t_best = *std::min_element(r.ours.begin(), r.ours.end());
  const double r_best = *std::min_element(r.theirs.begin(), r.theirs.end());
  std::printf("tessera / DDP: %.2fx tiles/s (median runs), %.2fx (best runs), both fp32\n", r_med / t_med, r_best / t_best);
  if (f.bf16) {
    const double b_med = median_of(r.ours_bf16);
    std::printf("tessera bf16 (mixed precision) / DDP fp32: %.2fx tiles/s (median runs)\n", r_med / b_med);
    report["speedup_bf16"] = r_med / b_med;
  }
  report["speedup"] = r_med / t_med;
  report["speedup_best"] = r_best / t_best;
  return report;
}

}  // namespace

void run_bench_train(const BenchTrainOptions& f) {
  f.validate();
  if (f.ref && !fs::exists(f.ref_script))
    throw Error(f.ref_script + ": reference script not found (use --ref-script or --no-ref)");
  const std::string scene = bench_scene(f.work_dir, f.scene_size);
  const std::string labels = (fs::path(scene).parent_path() / "scene_labels.tif").string();
  const fs::path run_dir = fs::path(f.work_dir) / "train-run";
  fs::remove_all(run_dir);
  fs::create_directories(run_dir);
  std::printf("bench train: unet-tiny (L4 f16, same padding), %lld^2 tiles, global batch %d, %d ranks, %d steps, "
              "%d interleaved repeats\n",
              (long long)f.tile, f.global_batch, f.ranks, f.steps, f.repeats);
  if (f.ref) std::printf("  reference: %s\n", f.ref_script.c_str());
  const Runs runs = interleaved_runs(f, run_dir, scene, labels);
  std::cout << print_results(f, runs).dump() << std::endl;
}

}  // namespace tessera::bench
