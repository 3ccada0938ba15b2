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
// the memory-aware balance: per stage its layers, the planner's stage_bytes — the stage model
// alone and, when a calibration for the model exists (`tessera plan --calibrate`), with the
// measured per-layer extras, which the memory balance then also uses — and the measured
// figure: the stage's parameters, gradients and Adam moments (from the tensors) plus the peak
// resident increase during a steady step (the second; Linux VmHWM reset through
// /proc/self/clear_refs). The first step's one-time growth (kernels, MPI buffers) is printed
// apart. Then the done-when bounds: the memory balance's largest stage against 1.25 × the
// mean stage and 1.10 × the DP optimum's prediction (the looser one applies), and the
// calibrated prediction's error.
//
// --memory-cap MiB: the largest input side whose training step stays within that much
// memory per rank (the measured figure above), for one rank holding the whole network (every
// rank runs it alone), K ranks with the naive balance and K ranks with the memory-aware
// balance: the planner's predicted largest side first, then a measured search starting there
// (doubling strides until bracketed, then bisection over the sides the model accepts).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "bench_common.hpp"
#include "bench_measure.hpp"
#include "bench_pipeline.hpp"
#include "tessera/core/cpu_tensor_cache.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/parallel/comm/runtime.hpp"

namespace tessera::bench {

void BenchPipelineOptions::validate() const {
  if (batch < 1) throw Error("--batch must be >= 1");
  if (steps < 1) throw Error("--steps must be >= 1");
  if (tile < 1) throw Error("--tile must be >= 1");
  if (threads < 0) throw Error("--threads must be >= 0 (0: automatic)");
  for (int m : micro)
    if (m < 1 || m > batch) throw Error("--micro: each M must be in 1 … --batch (" + std::to_string(batch) + ")");
  if (!(memory_cap >= 0)) throw Error("--memory-cap: must be > 0 MiB (0: no search)");
  with_flag("--schedule", [&] { parse_pipeline_schedule(schedule); });
  with_flag("--activation-checkpoint", [&] { parse_activation_checkpoint(activation_checkpoint); });
  with_flag("--balance", [&] { parallel::parse_balance_strategy(balance); });
}

namespace {

namespace fs = std::filesystem;
using namespace pipeline_bench;
using namespace ::tessera::engine;  // calibration

std::vector<int> balance_for(const Setup& s, const std::string& strategy, int k, int m) {
  return partition_for(s, s.seq, strategy, k, m).sizes;
}

struct TimeRow {
  int m = 0;
  std::vector<int> balance;
  double wall = 0, idle = 0, bubble = 0, ideal = 0, throughput = 0;
  std::vector<double> stage_compute;  // median per stage
  int max_in_flight = 0;              // over stages
};

TimeRow time_row(const BenchPipelineOptions& f, const Setup& s, parallel::ProcessGrid& grid, const UNetImpl& net, const Batch& b,
                 int m) {
  const int k = grid.shape().pipeline;
  TimeRow row;
  row.m = m;
  row.balance = balance_for(s, f.balance, k, m);
  parallel::PipelineTrainer t(net, s.side, grid.pipeline(), grid.data(),
                              s.pipeline_options(row.balance, m));
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
  row.wall = median_of(walls);
  row.idle = median_of(idles);
  row.bubble = median_of(bubbles);
  row.ideal = double(k - 1) / (m + k - 1);
  row.throughput = f.batch / row.wall;
  for (auto& v : compute) row.stage_compute.push_back(median_of(v));
  return row;
}

double max_over_mean(const std::vector<int64_t>& v) {
  const double mean = double(std::accumulate(v.begin(), v.end(), int64_t{0})) / double(v.size());
  return mean > 0 ? double(*std::max_element(v.begin(), v.end())) / mean : 0;
}

struct MemoryRow {
  std::string strategy;
  std::vector<int> balance;
  std::vector<int64_t> model, calibrated, measured, one_time;
  double optimum = 0;  // the partition's largest stage under the model it was cut by
};

MemoryRow memory_row(const BenchPipelineOptions& f, const Setup& s, parallel::ProcessGrid& grid, const UNetImpl& net,
                     const Batch& b, const std::string& strategy) {
  const int k = grid.shape().pipeline, m = f.batch;
  MemoryRow row;
  row.strategy = strategy;
  const parallel::Partition p = partition_for(s, s.seq, strategy, k, m);
  row.balance = p.sizes;
  row.optimum = p.max_cost;
  const auto plain = memory_options(s, s.seq, m, false), cal = memory_options(s, s.seq, m, true);
  for (int st = 0; st < k; ++st) {
    const int first = p.first(st), last = first + p.sizes[size_t(st)] - 1;
    row.model.push_back(stage_bytes(s.seq, first, last, k - st, plain));
    row.calibrated.push_back(stage_bytes(s.seq, first, last, k - st, cal));
  }
  grid.pipeline().barrier();
  const auto po = s.pipeline_options(row.balance, m);
  const StagePeak mine = measure_stage_peak(net, s.side, grid.pipeline(), grid.data(), po, b);
  row.measured = per_rank(grid.pipeline(), mine.total);
  row.one_time = per_rank(grid.pipeline(), mine.one_time);
  return row;
}

// Step time, bubble and idle share for each M (one row each).
void time_rows(const BenchPipelineOptions& f, const Setup& s, parallel::ProcessGrid& grid, UNet& net, const Batch& b,
               const std::vector<int>& micro, nlohmann::json& report) {
  const bool root = grid.world().rank() == 0;
  if (root)
    std::printf("%4s %16s %8s %7s %7s %7s %10s %9s  %s\n", "M", "balance", "wall_s", "ideal", "bubble", "idle",
                "samples/s", "in_flight", "compute_s per stage");
  for (int m : micro) {
    // Timed in train's memory policy for this micro-batch (the tensor cache; the threshold
    // train_mmap_threshold takes at its tile, the output side), as `tessera train` runs and
    // `plan --calibrate` times the layers.
    const int64_t inset = *unet_output_size(s.options, s.side);
    const TimeRow r = [&] {
      const CpuRunMemoryScope memory(
          train_mmap_threshold(level0_bytes(f.batch / m, s.options.base_filters, s.options.dims, inset)));
      return time_row(f, s, grid, *net, b, m);
    }();
    if (!root) continue;
    std::string per_stage;
    for (double c : r.stage_compute) per_stage += (per_stage.empty() ? "" : " ") + fmt::format("{:.3f}", c);
    std::printf("%4d %16s %8.4f %7.3f %7.3f %7.3f %10.2f %9d  %s\n", m, join(r.balance).c_str(), r.wall, r.ideal,
                r.bubble, r.idle, r.throughput, r.max_in_flight, per_stage.c_str());
    report["time"].push_back({{"micro_batches", m}, {"balance", r.balance}, {"wall_s", r.wall}, {"ideal_bubble", r.ideal},
                              {"measured_bubble", r.bubble}, {"measured_idle", r.idle}, {"samples_per_s", r.throughput},
                              {"max_in_flight", r.max_in_flight}, {"stage_compute_s", r.stage_compute}});
  }
}

// One balance's stage memory: model, calibrated model and measured, with the bounds.
void print_memory_row(const Setup& s, const MemoryRow& r, const std::string& strategy, int k, nlohmann::json& report) {
  std::printf("  %-7s balance %s\n", strategy.c_str(), join(r.balance).c_str());
  std::printf("    %-8s %6s %9s %10s %9s %7s %9s\n", "stage", "layers", "model", "calibrated", "measured", "error",
              "one-time");
  double worst = 0;
  for (int i = 0; i < k; ++i) {
    const auto at = size_t(i);
    const double error = double(r.calibrated[at] - r.measured[at]) / double(std::max<int64_t>(1, r.measured[at]));
    worst = std::max(worst, std::abs(error));
    std::printf("    %-8d %6d %9.2f %10.2f %9.2f %+6.1f%% %9.2f\n", i, r.balance[at], mib(r.model[at]),
                mib(r.calibrated[at]), mib(r.measured[at]), 100 * error, mib(r.one_time[at]));
  }
  std::printf("    %-8s %6s %9.3f %10.3f %9.3f\n", "max/mean", "", max_over_mean(r.model), max_over_mean(r.calibrated),
              max_over_mean(r.measured));
  const double mean = double(std::accumulate(r.measured.begin(), r.measured.end(), int64_t{0})) / k;
  const double largest = double(*std::max_element(r.measured.begin(), r.measured.end()));
  const double by_mean = 1.25 * mean, by_optimum = 1.10 * r.optimum;
  const bool mean_looser = by_mean >= by_optimum;
  const bool holds = largest <= std::max(by_mean, by_optimum);
  if (strategy == "memory")  // the DP optimum's bound; the naive split is shown for comparison
    std::printf("    largest stage measured %.2f MiB; bounds: 1.25 × mean %.2f MiB, 1.10 × predicted optimum %.2f "
                "MiB; the looser (%s) %s\n",
                largest / (1 << 20), by_mean / (1 << 20), by_optimum / (1 << 20),
                mean_looser ? "1.25 × mean" : "1.10 × optimum", holds ? "holds" : "is missed");
  std::printf("    %s prediction vs measured: worst stage %.1f%% (%s 20%%)\n",
              s.calibration.empty() ? "uncalibrated" : "calibrated", 100 * worst, worst <= 0.2 ? "within" : "beyond");
  report["memory"][strategy] = {{"balance", r.balance},
                                {"model_bytes", r.model},
                                {"calibrated_bytes", r.calibrated},
                                {"measured_bytes", r.measured},
                                {"first_step_one_time_bytes", r.one_time},
                                {"predicted_optimum_bytes", r.optimum},
                                {"max_over_mean_measured", max_over_mean(r.measured)},
                                {"bound", mean_looser ? "1.25_mean" : "1.10_optimum"},
                                {"bound_holds", holds},
                                {"worst_prediction_error", worst}};
}

void memory_rows(const BenchPipelineOptions& f, const Setup& s, parallel::ProcessGrid& grid, UNet& net, const Batch& b, nlohmann::json& report) {
  const bool root = grid.world().rank() == 0;
  if (root)
    std::printf("memory at M = %d (one tile per micro-batch), MiB per stage: the stage model, the model with the "
                "calibrated layer extras, and the measured peak (stage built, two steps with Adam)\n",
                f.batch);
  for (const std::string strategy : {"naive", "memory"}) {
    const MemoryRow r = memory_row(f, s, grid, *net, b, strategy);
    if (root) print_memory_row(s, r, strategy, grid.shape().pipeline, report);
  }
}

// The largest side within --memory-cap for one rank, the naive and the memory-aware split.
void cap_rows(const BenchPipelineOptions& f, const Setup& s, parallel::ProcessGrid& grid, UNet& net, nlohmann::json& report) {
  const bool root = grid.world().rank() == 0;
  const auto cap = int64_t(f.memory_cap * double(1 << 20));
  auto self = parallel::make_self_communicator();
  if (root)
    std::printf("largest trainable input side within %.0f MiB per rank (measured peak as above; batch %d, M = %d, %s; "
                "sides %lld + multiples of %lld up to %lld)\n",
                f.memory_cap, f.batch, f.batch, f.schedule.c_str(), (long long)s.side,
                (long long)unet_alignment(s.options), (long long)f.max_side);
  if (root)
    std::printf("  %-8s %5s %8s %8s %10s %15s %10s %6s  %s\n", "layout", "ranks", "side", "output", "peak MiB",
                "over: side/MiB", "predicted", "probes", "balance");
  for (CapConfig config : {CapConfig::kOneRank, CapConfig::kNaive, CapConfig::kMemory}) {
    const CapRow r = largest_side(f, s, grid, *self, *net, config, cap);
    if (!root) continue;
    const std::string over =
        r.over_side ? fmt::format("{}/{:.1f}", r.over_side, mib(r.over_peak)) : std::string("none");
    const std::string out_side = r.side ? std::to_string(*unet_output_size(s.options, r.side)) : "-";
    std::printf("  %-8s %5d %8lld %8s %10.1f %15s %10lld %6d  %s\n", r.name.c_str(), r.ranks, (long long)r.side,
                out_side.c_str(), mib(r.peak), over.c_str(), (long long)r.predicted_side, r.probes,
                join(r.balance).c_str());
    report["memory_cap"]["cap_bytes"] = cap;
    report["memory_cap"]["layouts"].push_back({{"layout", r.name}, {"ranks", r.ranks}, {"largest_side", r.side},
                                               {"peak_bytes", r.peak}, {"over_side", r.over_side},
                                               {"over_peak_bytes", r.over_peak}, {"predicted_side", r.predicted_side},
                                               {"balance", r.balance}, {"probes", r.probes}});
  }
}

}  // namespace

void run_bench_pipeline(const BenchPipelineOptions& f) {
  f.validate();
  std::vector<int> micro = f.micro;
  if (micro.empty())
    for (int m = 1; m <= std::min(8, f.batch); m *= 2) micro.push_back(m);
  parallel::Communicator& world = parallel::world();
  parallel::ProcessGrid grid(world, parallel::GridShape().with_pipeline(world.size()));
  const int k = grid.shape().pipeline;
  const bool root = world.rank() == 0;
  const int threads = configure_threads(f.threads);
  ModelCalibration cal;
  fs::path cal_path;
  const Setup s = make_setup(f, cal, cal_path);
  if (s.seq.size() < k) throw Error("mpirun -np: more ranks (" + std::to_string(k) + ") than layers");

  torch::manual_seed(0);  // the same model and batch on every rank
  UNet net(s.options);
  const int64_t out = *unet_output_size(s.options, s.side);
  const Batch b = make_batch(s.options, f.batch, s.side);
  if (root)
    std::printf("bench pipeline: %s, input side %lld (output %lld), %d layers, batch %d, K = %d ranks, %s, %s balance, "
                "checkpoint %s, %d thread(s) per rank, median of %d steps\n",
                f.model_preset.c_str(), (long long)s.side, (long long)out, s.seq.size(), f.batch, k, f.schedule.c_str(),
                f.balance.c_str(), f.activation_checkpoint.c_str(), threads, f.steps);
  if (root)
    std::printf("memory model: %s\n",
                !s.calibration.empty() ? ("the stage model + calibrated layer extras from " + cal_path.string()).c_str()
                : !cal.other_options.empty()
                    ? ("the stage model alone (" + cal.other_options + ")").c_str()
                    : ("the stage model alone (no calibration for " + f.model_preset + " in " + cal_path.string() +
                       "; tessera plan --calibrate adds one)")
                          .c_str());
  nlohmann::json report{{"model", f.model_preset}, {"input_side", s.side}, {"batch", f.batch}, {"stages", k},
                        {"checkpoint", f.activation_checkpoint},
                        {"schedule", f.schedule}, {"balance", f.balance}, {"threads", threads}};
  // Memory before time: the meters fix glibc's mmap threshold before any step, so freed buffers
  // leave the resident set; timed steps first would leave the heap full of free chunks that the
  // measured steps reuse at scattered addresses and keep (as bench spatial found,
  // docs/measured-results.md). The timed steps then run with the heap reused again.
  if (f.memory) memory_rows(f, s, grid, net, b, report);
  if (f.memory_cap > 0) cap_rows(f, s, grid, net, report);
  restore_mmap_threshold();
  if (f.time) time_rows(f, s, grid, net, b, micro, report);
  if (root) std::cout << report.dump() << std::endl;
}

}  // namespace tessera::bench
