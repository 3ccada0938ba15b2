// tessera bench pipeline: pipeline-parallel training of a U-Net over all ranks (one stage per
// rank), run under mpirun like `tessera train`; rank 0 prints.
//   mpirun -np 4 tessera bench pipeline --model unet-tiny --tile 64 --batch 8 --micro 1,2,4,8
//
// Time, for each M in --micro: the median over --steps timed steps (after one warm-up) of
//   wall     the slowest stage's PipelineTrainer step time (communication included);
//   idle     1 − Σ_s compute_s / (K · wall): the share of K · wall the stages did not spend
//            computing — bubble plus load imbalance between stages;
//   bubble   1 − max_s compute_s / wall: the idle share of the busiest stage, which sets the
//            pace; compared with the ideal (K − 1) / (M + K − 1) of equal stages;
//   samples/s = batch / wall.
// Memory, at M = batch (one tile per micro-batch, the planner's convention), for the naive and
// the memory-aware balance: per stage its layers, the planner's stage_bytes (total, and its
// activation part: total − 16 B per parameter) and the measured activation peak: the process's
// peak RSS during one step minus its RSS just before it (Linux VmHWM, reset through
// /proc/self/clear_refs; glibc's mmap threshold is fixed at 64 KiB so freed tensors leave the
// RSS). Parameters and gradients exist before that step, Adam's moments not at all, so the
// measured figure compares with the activation part.
#include <malloc.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "commands.hpp"
#include "model_options.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/parallel/pipeline.hpp"
#include "tessera/parallel/planner.hpp"
#include "tessera/parallel/process_grid.hpp"
#include "tessera/parallel/runtime.hpp"

namespace tessera::cli {
namespace {

using parallel::PipelineScheduleKind;

struct Flags {
  ModelFlags model;
  int64_t tile = 64;
  int batch = 8, steps = 5, threads = 1;
  std::vector<int> micro = {1, 2, 4, 8};
  std::string schedule = "1f1b", balance = "memory";
  bool no_memory = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// kB fields of /proc/self/status, in bytes.
int64_t status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  throw Error("/proc/self/status: no " + field + " (the memory figures need Linux)");
}

void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

struct Setup {
  UNetOptions options;
  int64_t side = 0;
  LayerSequence seq;
  PipelineScheduleKind schedule;
};

// `time` balances the planner's predicted layer times (FLOP model at its default device
// figures), not profiled ones: equal compute per stage, which is what the bubble assumes.
std::vector<int> balance_for(const Setup& s, const std::string& strategy, int k, int m) {
  const auto mo = parallel::StageMemoryOptions().with_micro_batches(m).with_schedule(s.schedule);
  const auto kind = parallel::parse_balance_strategy(strategy);
  const parallel::PlanOptions defaults(s.options, {}, 1, 1);
  const std::vector<double> seconds =
      kind == parallel::BalanceStrategy::kTime
          ? parallel::predicted_layer_seconds(s.seq, defaults.device_flops, defaults.memory_bytes_per_second, true)
          : std::vector<double>{};
  return parallel::balance(kind, s.seq, k, mo, seconds).sizes;
}

struct Batch {
  torch::Tensor input, target;
};

struct TimeRow {
  int m = 0;
  std::vector<int> balance;
  double wall = 0, idle = 0, bubble = 0, ideal = 0, throughput = 0;
  std::vector<double> stage_compute;  // median per stage
  int max_in_flight = 0;              // over stages
};

TimeRow time_row(const Flags& f, const Setup& s, parallel::ProcessGrid& grid, const UNetImpl& net, const Batch& b,
                 int m) {
  const int k = grid.shape().pipeline;
  TimeRow row;
  row.m = m;
  row.balance = balance_for(s, f.balance, k, m);
  parallel::PipelineTrainer t(net, s.side, grid.pipeline(), grid.data(),
                              parallel::PipelineOptions(row.balance).with_micro_batches(m).with_schedule(s.schedule));
  std::vector<double> walls, idles, bubbles;
  std::vector<std::vector<double>> compute(static_cast<size_t>(k));
  for (int step = 0; step <= f.steps; ++step) {
    t.train_step(b.input, b.target);
    if (step == 0) continue;  // warm-up
    torch::Tensor wall = torch::tensor({t.last_step().seconds}, torch::kDouble);
    grid.pipeline().allreduce(wall, parallel::ReduceOp::kMax);
    torch::Tensor c = torch::zeros({k}, torch::kDouble);
    c[t.stage_index()] = t.last_step().compute_seconds;
    grid.pipeline().allreduce(c, parallel::ReduceOp::kSum);
    const double w = wall.item<double>();
    walls.push_back(w);
    idles.push_back(1.0 - c.sum().item<double>() / (k * w));
    bubbles.push_back(1.0 - c.max().item<double>() / w);
    for (int i = 0; i < k; ++i) compute[size_t(i)].push_back(c[i].item<double>());
  }
  torch::Tensor flight = torch::tensor({int64_t(t.last_step().max_in_flight)}, torch::kInt64);
  grid.pipeline().allreduce(flight, parallel::ReduceOp::kMax);
  row.max_in_flight = int(flight.item<int64_t>());
  row.wall = median(walls);
  row.idle = median(idles);
  row.bubble = median(bubbles);
  row.ideal = double(k - 1) / (m + k - 1);
  row.throughput = f.batch / row.wall;
  for (auto& v : compute) row.stage_compute.push_back(median(v));
  return row;
}

struct MemoryRow {
  std::string strategy;
  std::vector<int> balance;
  std::vector<int64_t> predicted, predicted_activations, measured;
};

double max_over_mean(const std::vector<int64_t>& v) {
  const double mean = double(std::accumulate(v.begin(), v.end(), int64_t{0})) / double(v.size());
  return mean > 0 ? double(*std::max_element(v.begin(), v.end())) / mean : 0;
}

MemoryRow memory_row(const Flags& f, const Setup& s, parallel::ProcessGrid& grid, const UNetImpl& net,
                     const Batch& b, const std::string& strategy) {
  const int k = grid.shape().pipeline, m = f.batch;
  MemoryRow row;
  row.strategy = strategy;
  row.balance = balance_for(s, strategy, k, m);
  const auto mo = parallel::StageMemoryOptions().with_micro_batches(m).with_schedule(s.schedule);
  for (int st = 0, first = 0; st < k; first += row.balance[size_t(st)], ++st) {
    const int last = first + row.balance[size_t(st)] - 1;
    const int64_t total = parallel::stage_bytes(s.seq, first, last, k - st, mo);
    int64_t params = 0;
    for (int i = first; i <= last; ++i) params += s.seq.layers[size_t(i)].params;
    row.predicted.push_back(total);
    row.predicted_activations.push_back(total - 16 * params);
  }
  parallel::PipelineTrainer t(net, s.side, grid.pipeline(), grid.data(),
                              parallel::PipelineOptions(row.balance).with_micro_batches(m).with_schedule(s.schedule));
  t.train_step(b.input, b.target);  // gradients allocated, kernels warmed
  grid.pipeline().barrier();
  malloc_trim(0);
  reset_peak_rss();
  const int64_t before = status_bytes("VmRSS");
  t.train_step(b.input, b.target);
  torch::Tensor mine = torch::zeros({k}, torch::kInt64);
  mine[t.stage_index()] = status_bytes("VmHWM") - before;
  grid.pipeline().allreduce(mine, parallel::ReduceOp::kSum);
  for (int i = 0; i < k; ++i) row.measured.push_back(mine[i].item<int64_t>());
  return row;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

void run(const Flags& f) {
  if (f.batch < 1) throw Error("--batch must be >= 1");
  if (f.steps < 1) throw Error("--steps must be >= 1");
  for (int m : f.micro)
    if (m < 1 || m > f.batch) throw Error("--micro: each M must be in 1 … --batch (" + std::to_string(f.batch) + ")");
  parallel::parse_balance_strategy(f.balance);  // a bad name fails before any work
  mallopt(M_MMAP_THRESHOLD, 64 << 10);  // fixed: large tensors are returned to the OS when freed
  parallel::Communicator& world = parallel::world();
  parallel::ProcessGrid grid(world, parallel::GridShape().with_pipeline(world.size()));
  const int k = grid.shape().pipeline;
  const bool root = world.rank() == 0;
  const int threads = configure_threads(f.threads);

  Setup s{f.model.resolve(), f.tile, {}, parallel::parse_pipeline_schedule(f.schedule)};
  while (!unet_output_size(s.options, s.side)) {  // the smallest valid input side >= --tile
    if (++s.side > 16 * f.tile + 1024) throw Error("--tile: no valid input side for this model near it");
  }
  s.seq = unet_layer_sequence(s.options, s.side);
  if (s.seq.size() < k) throw Error("mpirun -np: more ranks (" + std::to_string(k) + ") than layers");

  torch::manual_seed(0);  // the same model and batch on every rank
  UNet net(s.options);
  const int64_t out = *unet_output_size(s.options, s.side);
  std::vector<int64_t> in_shape = {f.batch, s.options.in_channels}, out_shape = {f.batch};
  for (int d = 0; d < s.options.dims; ++d) {
    in_shape.push_back(s.side);
    out_shape.push_back(out);
  }
  const Batch b{torch::randn(in_shape), torch::randint(0, s.options.classes, out_shape, torch::kInt64)};

  if (root)
    std::printf("bench pipeline: %s, input side %lld (output %lld), %d layers, batch %d, K = %d ranks, %s, %s balance, "
                "%d thread(s) per rank, median of %d steps\n",
                f.model.preset.c_str(), (long long)s.side, (long long)out, s.seq.size(), f.batch, k, f.schedule.c_str(),
                f.balance.c_str(), threads, f.steps);
  nlohmann::json report{{"model", f.model.preset}, {"input_side", s.side}, {"batch", f.batch}, {"stages", k},
                        {"schedule", f.schedule}, {"balance", f.balance}, {"threads", threads}};
  if (root)
    std::printf("%4s %16s %8s %7s %7s %7s %10s %9s  %s\n", "M", "balance", "wall_s", "ideal", "bubble", "idle",
                "samples/s", "in_flight", "compute_s per stage");
  for (int m : f.micro) {
    const TimeRow r = time_row(f, s, grid, *net, b, m);
    if (!root) continue;
    std::string per_stage;
    for (double c : r.stage_compute) per_stage += (per_stage.empty() ? "" : " ") + fmt::format("{:.3f}", c);
    std::printf("%4d %16s %8.4f %7.3f %7.3f %7.3f %10.2f %9d  %s\n", m, join(r.balance).c_str(), r.wall, r.ideal,
                r.bubble, r.idle, r.throughput, r.max_in_flight, per_stage.c_str());
    report["time"].push_back({{"micro_batches", m}, {"balance", r.balance}, {"wall_s", r.wall}, {"ideal_bubble", r.ideal},
                              {"measured_bubble", r.bubble}, {"measured_idle", r.idle}, {"samples_per_s", r.throughput},
                              {"max_in_flight", r.max_in_flight}, {"stage_compute_s", r.stage_compute}});
  }
  if (!f.no_memory) {
    if (root)
      std::printf("memory at M = %d (one tile per micro-batch), MiB per stage: planner total / planner activations / "
                  "measured peak RSS delta of one step\n",
                  f.batch);
    for (const std::string strategy : {"naive", "memory"}) {
      const MemoryRow r = memory_row(f, s, grid, *net, b, strategy);
      if (!root) continue;
      std::printf("  %-7s balance %s\n", strategy.c_str(), join(r.balance).c_str());
      for (int i = 0; i < k; ++i)
        std::printf("    stage %d: %3d layers %9.2f %9.2f %9.2f\n", i, r.balance[size_t(i)],
                    double(r.predicted[size_t(i)]) / (1 << 20), double(r.predicted_activations[size_t(i)]) / (1 << 20),
                    double(r.measured[size_t(i)]) / (1 << 20));
      std::printf("    max/mean: %9.3f %9.3f %9.3f\n", max_over_mean(r.predicted),
                  max_over_mean(r.predicted_activations), max_over_mean(r.measured));
      report["memory"][strategy] = {{"balance", r.balance}, {"predicted_bytes", r.predicted},
                                    {"predicted_activation_bytes", r.predicted_activations},
                                    {"measured_rss_delta_bytes", r.measured},
                                    {"max_over_mean_predicted", max_over_mean(r.predicted)},
                                    {"max_over_mean_predicted_activations", max_over_mean(r.predicted_activations)},
                                    {"max_over_mean_measured", max_over_mean(r.measured)}};
    }
  }
  if (root) std::cout << report.dump() << std::endl;
}

}  // namespace

void register_bench_pipeline(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("pipeline", "Pipeline-parallel step time, bubble and stage memory (under mpirun)");
  static Flags f;
  f.model.add_to(cmd);
  cmd->add_option("--tile", f.tile, "Input tile side (raised to the next side the model accepts)")->capture_default_str();
  cmd->add_option("--batch", f.batch, "Samples per step (the mini-batch)")->capture_default_str();
  cmd->add_option("--micro", f.micro, "Micro-batch counts M to time")->delimiter(',');
  cmd->add_option("--schedule", f.schedule, "gpipe or 1f1b")->capture_default_str();
  cmd->add_option("--balance", f.balance, "naive, memory or time (predicted layer times), for the timed runs")->capture_default_str();
  cmd->add_option("--steps", f.steps, "Timed steps per M (after one warm-up)")->capture_default_str();
  cmd->add_option("--threads", f.threads, "LibTorch threads per rank (0: automatic)")->capture_default_str();
  cmd->add_flag("--no-memory", f.no_memory, "Skip the per-stage memory table");
  cmd->callback([] { run(f); });
}

}  // namespace tessera::cli
