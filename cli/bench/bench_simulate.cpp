// tessera bench simulate: the simulator (parallel/simulator.hpp) against this machine.
//   tessera bench simulate [--model unet-tiny] [--tile 48] [--batch 8] [--micro 1,2,4,8]
//
// Three measurements, then the simulator's predictions for the same layouts, side by side:
//   1. `tessera plan --calibrate --model M --threads 1` (one core per rank, as under mpirun):
//      every layer's forward + backward time per tile, measured alone — the simulator's
//      only per-model input (with clusters/this-machine.yaml: MPI's bandwidth and latency,
//      the memory bandwidth); nothing below is fitted to the step times it predicts. Each
//      run is priced from layers timed as that run runs them, in train's memory policy: each
//      pipeline row from --calibration-tile --tile and --calibration-batch batch / M (its
//      micro-batch), contiguous (bench pipeline's format); the data-parallel row from
//      --calibration-batch batch / 2 (train's micro-batch) and --calibration-channels-last
//      (train's default). bench pipeline cuts its stages from the first, one-tile calibration;
//   2. `mpirun -np 2 tessera bench pipeline` (GPipe and 1F1B, each M of --micro, the global
//      batch split into M micro-batches of batch / M tiles): the slowest stage's step time;
//   3. `mpirun -np 2 tessera train` (data parallel, batch / 2 tiles per rank, Adam), --repeats
//      runs: the median of their median step times (metrics.jsonl).
// The simulator gets the same layout (dp × pp, M, tiles per micro-batch, schedule, the time
// balance cut from the same calibration) and predicts one step; the error is
// (simulated − measured) / measured, and the done-when bound is 25 %.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_simulate_options.hpp"
#include "child_process.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/model_registry.hpp"
#include "tessera/core/unet_spec.hpp"
#include "tessera/engine/calibration.hpp"
#include "tessera/parallel/plan/cluster.hpp"
#include "tessera/parallel/plan/simulator.hpp"
#include "tessera/run/run_layout.hpp"

namespace tessera::bench {
namespace {

constexpr int kRanks = 2;         // of every measured layout
constexpr double kBound = 0.25;   // the done-when bound on |simulated − measured| / measured

}  // namespace

void BenchSimulateOptions::validate() const {
  if (batch % kRanks != 0) throw Error("--batch must be a multiple of " + std::to_string(kRanks));
  for (int m : micro)
    if (m < 1 || batch % m != 0) throw Error("--micro: each M must divide --batch (" + std::to_string(batch) + ")");
  if (repeats < 1) throw Error("--repeats must be >= 1");
  if (pipeline_steps < 1 || train_steps < 1) throw Error("--pipeline-steps and --train-steps must be >= 1");
  const int64_t alignment = unet_alignment(model_preset(model));
  if (tile < 1 || tile % alignment != 0)
    throw Error("--tile must be a positive multiple of " + std::to_string(alignment));
}

namespace {

using namespace ::tessera::engine;  // calibration
namespace fs = std::filesystem;


struct Row {
  std::string name;
  double measured = 0, simulated = 0;
  std::string detail;
  double error() const { return (simulated - measured) / measured; }
};

// The simulator of this run: the model's layer sequence at the bench's side, its layer times
// from the calibration, the cluster description.
struct Simulator {
  LayerSequence seq;
  std::vector<double> layer_seconds;
  parallel::ClusterModel cluster;

  parallel::SimulationResult operator()(int dp, int pp, int m, int b, const std::string& schedule, bool adam) const {
    auto o = parallel::SimulationOptions(seq)
                 .with_tiles(int64_t{dp} * m * b)
                 .with_data_parallel(dp)
                 .with_pipeline_stages(pp)
                 .with_micro_batches(m)
                 .with_tiles_per_micro_batch(b)
                 .with_schedule(parse_pipeline_schedule(schedule))
                 .with_balance(parallel::BalanceStrategy::kTime)
                 .with_layer_train_seconds(layer_seconds)
                 .with_optimizer_step(adam);
    return parallel::simulate(o, cluster);
  }
};

// 1. The simulator's input: per-layer times on one core (tessera plan --calibrate), timed with
// `timing` (the flags that make the calibration run as the priced run does).
Simulator calibrated_simulator(const BenchSimulateOptions& f, const UNetOptions& model, int64_t side, const fs::path& cal_path,
                               const std::vector<std::string>& timing) {
  Simulator sim{parallel::simulated_layer_sequence(model, side), {}, parallel::load_cluster(f.cluster)};
  if (sim.cluster.devices_per_node < kRanks)
    throw Error(f.cluster + ": the simulated node has fewer than " + std::to_string(kRanks) + " devices");
  sim.cluster.nodes = 1;
  std::vector<std::string> args{"plan", "--calibrate", "--model", f.model, "--threads", "1", "--calibration", cal_path.string()};
  args.insert(args.end(), timing.begin(), timing.end());
  cli::run_ranks(f.mpirun, 1, args, "bench simulate: tessera plan --calibrate");
  const ModelCalibration cal = model_calibration(read_calibration(cal_path), cal_path, f.model, model);
  if (cal.time.empty()) throw Error(cal_path.string() + ": the calibration holds no layer times");
  sim.layer_seconds = cal.time.seconds(sim.seq);
  if (cal.device_flops) sim.cluster.device.fp32_flops = *cal.device_flops;
  double tile = 0;
  for (double t : sim.layer_seconds) tile += t;
  std::printf("calibrated: %zu layer times (%s%s), one tile forward + backward %.4f s alone\n", sim.layer_seconds.size(),
              cal_path.c_str(), fmt::format("{}{}", timing.empty() ? "" : ", ", fmt::join(timing, " ")).c_str(), tile);
  return sim;
}

// 2. Pipeline parallel, one stage per rank: bench pipeline's measured steps (timed in train's
// memory policy) beside the simulated, each M priced from layers timed at its micro-batch
// (batch / M tiles a pass).
void pipeline_rows(const BenchSimulateOptions& f, const UNetOptions& model, int64_t side, const fs::path& cal_path,
                   std::vector<Row>& rows) {
  std::map<int, Simulator> by_micro_batch;
  for (int m : f.micro) {
    const int b = f.batch / m;
    if (by_micro_batch.count(b)) continue;
    const fs::path path = cal_path.parent_path() / fmt::format("calibration-pipeline-b{}.json", b);
    fs::remove(path);
    by_micro_batch.emplace(b, calibrated_simulator(f, model, side, path,
                                                   {"--calibration-tile", std::to_string(f.tile), "--calibration-batch",
                                                    std::to_string(b)}));
  }
  const std::string micro = join(f.micro);
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    std::printf("running mpirun -np %d tessera bench pipeline --schedule %s --micro %s …\n", kRanks, schedule.c_str(),
                micro.c_str());
    std::fflush(stdout);
    const std::vector<std::string> args{"bench", "pipeline", "--model", f.model, "--tile", std::to_string(side),
                                        "--batch", std::to_string(f.batch), "--micro", micro, "--schedule", schedule,
                                        "--balance", "time", "--steps", std::to_string(f.pipeline_steps),
                                        "--no-memory", "--threads", "1", "--calibration", cal_path.string()};
    const cli::ChildResult r = cli::run_ranks(f.mpirun, kRanks, args, "bench simulate: tessera bench pipeline");
    const nlohmann::json report = cli::last_json(r.out, "tessera bench pipeline");
    if (report.at("input_side").get<int64_t>() != side)
      throw Error("bench simulate: bench pipeline ran input side " + report.at("input_side").dump() + ", not " +
                  std::to_string(side));
    for (const auto& t : report.at("time")) {
      const int m = t.at("micro_batches").get<int>();
      const parallel::SimulationResult sim = by_micro_batch.at(f.batch / m)(1, kRanks, m, f.batch / m, schedule, false);
      const auto measured_balance = t.at("balance").get<std::vector<int>>();
      rows.push_back({fmt::format("pipeline {} M={}", schedule, m), t.at("wall_s").get<double>(), sim.step_seconds,
                      fmt::format("balance {} (simulated {}), bubble {:.2f} (simulated {:.2f})",
                                  fmt::join(measured_balance, ","), fmt::join(sim.balance, ","),
                                  t.at("measured_bubble").get<double>(),
                                  sim.step_seconds > 0 ? sim.breakdown.bubble / sim.pass_seconds : 0.0)});
    }
  }
}

// 3. Data parallel training through the real command, --repeats runs, priced from layers timed
// as train runs them (its tile, micro-batch, channels-last and memory policy).
Row train_row(const BenchSimulateOptions& f, const UNetOptions& model, int64_t side, const fs::path& dir) {
  const fs::path cal_path = dir / "calibration-train.json";
  fs::remove(cal_path);
  const Simulator simulate =
      calibrated_simulator(f, model, side, cal_path,
                           {"--calibration-tile", std::to_string(f.tile), "--calibration-batch",
                            std::to_string(f.batch / kRanks), "--calibration-channels-last"});
  const std::string scene = bench_scene(f.work_dir, 1024);
  const fs::path config = dir / "train.yaml";
  {
    std::ofstream y(config);
    y << "model: {preset: " << f.model << "}\n"
      << "data:\n  pairs: [{image: " << scene << ", labels: " << fs::path(scene).parent_path() / "scene_labels.tif"
      << "}]\n"
      << "train: {tile: " << f.tile << ", batch: " << f.batch / kRanks << ", steps: " << f.train_steps
      << ", learning_rate: 0.001, seed: 0, augment: false, checkpoint_every: " << f.train_steps + 1 << "}\n";
  }
  std::vector<double> runs;
  for (int k = 0; k < f.repeats; ++k) {
    std::printf("running mpirun -np %d tessera train (data parallel), run %d of %d …\n", kRanks, k + 1, f.repeats);
    std::fflush(stdout);
    const fs::path run_dir = dir / "train-run";
    fs::remove_all(run_dir);
    cli::run_ranks(f.mpirun, kRanks, {"train", "--config", config.string(), "--run-dir", run_dir.string(), "--no-progress"},
              "bench simulate: tessera train");
    runs.push_back(median_step_seconds(RunLayout(run_dir.string()).metrics()));
  }
  const parallel::SimulationResult sim = simulate(kRanks, 1, 1, f.batch / kRanks, "gpipe", true);
  const auto& b = sim.breakdown;
  std::string spread;
  for (double r : runs) spread += (spread.empty() ? "" : " ") + fmt::format("{:.4f}", r);
  return {"train data parallel", median_of(runs), sim.step_seconds,
          fmt::format("runs {}; simulated compute {:.4f} + allreduce {:.4f} + io {:.4f} + adam {:.4f}", spread,
                      b.compute, b.allreduce, b.io, b.optimizer)};
}

void print_rows(const BenchSimulateOptions& f, int64_t side, const std::vector<Row>& rows) {
  std::printf("\n%-22s %12s %12s %8s  %s\n", "layout (2 ranks)", "measured s", "simulated s", "error", "");
  nlohmann::json report{{"model", f.model}, {"input_side", side}, {"batch", f.batch}, {"ranks", kRanks},
                        {"bound", kBound}};
  bool all_within = true;
  for (const Row& r : rows) {
    const bool within = std::abs(r.error()) <= kBound;
    all_within = all_within && within;
    std::printf("%-22s %12.4f %12.4f %+7.1f%%  %s\n", r.name.c_str(), r.measured, r.simulated, 100 * r.error(),
                r.detail.c_str());
    report["rows"].push_back({{"layout", r.name}, {"measured_s", r.measured}, {"simulated_s", r.simulated},
                              {"error", r.error()}, {"within", within}});
  }
  std::printf("every prediction within %.0f%% of the measured step: %s\n", 100 * kBound, all_within ? "yes" : "NO");
  report["all_within"] = all_within;
  std::cout << report.dump() << std::endl;
}

}  // namespace

void run_bench_simulate(const BenchSimulateOptions& f) {
  f.validate();
  const UNetOptions model = model_preset(f.model);
  const int64_t side = f.tile + unet_remainder(model) + 2 * unet_halo(model);
  const fs::path dir = fs::path(f.work_dir) / "simulate";
  fs::create_directories(dir);
  const fs::path cal_path = dir / "calibration.json";
  fs::remove(cal_path);
  std::printf("bench simulate: %s, inset %lld (input %lld), global batch %d, %d ranks, cluster %s\n", f.model.c_str(),
              (long long)f.tile, (long long)side, f.batch, kRanks, f.cluster.c_str());
  std::fflush(stdout);
  calibrated_simulator(f, model, side, cal_path, {});  // bench pipeline's balance cut
  std::vector<Row> rows;
  pipeline_rows(f, model, side, cal_path, rows);
  rows.push_back(train_row(f, model, side, dir));
  print_rows(f, side, rows);
}

}  // namespace tessera::bench
