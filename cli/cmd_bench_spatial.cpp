// tessera bench spatial: spatial parallelism (parallel/spatial.hpp) of one U-Net tile over P
// ranks, each holding one block of it. Run without mpirun; for every layout it launches
//   mpirun -np P tessera bench spatial --worker measure --worker-mesh 2x2 …
// (P = 1: the same command without mpirun, the one-process step with no decomposition) and
// reads back the worker's JSON line. Printed per layout (P = 1, 2, 4 split along the first
// axis, then --mesh, e.g. 2 × 2):
//   peak     per-rank training memory, measured as `tessera bench pipeline` does: the
//            parameters, gradients and Adam moments (from the tensors) plus the peak resident
//            increase during a steady step (VmHWM reset through /proc/self/clear_refs), the
//            largest over the ranks; beside it the planner's prediction (planner.hpp
//            spatial_plan) and the ratio to the one-rank peak;
//   step     the median over --steps steps (after a warm-up) of the slowest rank's step
//            (forward, backward, gradient allreduce, Adam); ranks share this machine's cores;
//   halo     the bytes the ranks sent in halo exchanges during one step (forward + backward,
//            SpatialDecomposition's counters, Σ over ranks) against the planner's prediction,
//            which must be equal rank by rank.
// --memory-cap MiB: for each P of --ranks (1-D split), the largest input side whose measured
// peak stays within the cap: the planner's largest side first, then a measured search from
// there in one mpirun job (doubling strides until bracketed, then bisection over the sides
// the split accepts, multiples of 2^(L−1)). With --pipeline also `tessera bench pipeline
// --memory-cap` on the largest P, for the same model and cap.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "bench_common.hpp"
#include "bench_pipeline.hpp"
#include "child_process.hpp"
#include "commands.hpp"
#include "model_options.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/losses.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"
#include "tessera/parallel/comm/process_grid.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/parallel/modes/spatial.hpp"
#include "tessera/parallel/modes/spatial_hooks.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera::cli {
namespace {

using pipeline_bench::Batch;
using pipeline_bench::make_batch;
using pipeline_bench::mib;

struct Flags {
  ModelFlags model;
  int64_t side = 256, max_side = 2048;
  int batch = 1, steps = 3, threads = 1;
  std::vector<int> ranks{1, 2, 4};
  std::vector<std::string> meshes{"2x2"};
  std::optional<double> memory_cap_mib;
  bool pipeline = false;
  std::string mpirun = "mpirun";
  std::string worker, worker_mesh;  // internal: what a launched worker does
};

// The preset with the flags given; `same` padding and group norm unless asked otherwise.
UNetOptions resolve_model(const Flags& f) {
  UNetOptions o = f.model.resolve();
  if (!f.model.given("padding")) o.padding = Padding::kSame;
  if (!f.model.given("norm")) o.norm = Norm::kGroup;
  o.validate();
  return o;
}

// The resolved model as flags (--levels 4 --padding same …), for the launched commands.
std::vector<std::string> model_flags(const Flags& f, const UNetOptions& o) {
  std::vector<std::string> args{"--model", f.model.preset};
  const nlohmann::json fields = o;
  for (const auto& [key, value] : fields.items()) {
    std::string flag = "--" + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    args.push_back(flag);
    args.push_back(value.is_string() ? value.get<std::string>() : value.dump());
  }
  return args;
}

std::string mesh_text(const std::vector<int>& parts) {
  std::string s;
  for (int p : parts) s += (s.empty() ? "" : "x") + std::to_string(p);
  return s;
}

// ---- the worker: one layout under mpirun ------------------------------------------------

// One rank's model and, with more than one rank, its spatial hooks (SpatialTrainHooks: the
// U-Net on this rank's block under a DecompositionScope, gradients summed over the blocks).
class Worker {
 public:
  Worker(const UNetOptions& o, parallel::ProcessGrid& grid, const SpatialMesh& mesh) : net_(o), grid_(grid) {
    if (grid.shape().spatial > 1) {
      hooks_ = std::make_unique<parallel::SpatialTrainHooks>(grid.spatial(), grid.data(), mesh);
      hooks_->on_start(net_);
    }
  }

  // Forward, backward, gradient sum and Adam; gradients zeroed in place (no reallocation).
  void step(const Batch& b, torch::optim::Adam& adam) {
    for (auto& p : net_->parameters())
      if (p.grad().defined()) p.mutable_grad().zero_();
    if (hooks_) {
      hooks_->forward_backward(net_, b.input, b.target, loss_, 1.0);
      hooks_->on_gradients(net_);
    } else {
      segmentation_loss(net_->forward(b.input), b.target, loss_).backward();
    }
    adam.step();
  }

  int64_t halo_bytes() const {
    return hooks_ ? hooks_->decomposition().halo_bytes_forward() + hooks_->decomposition().halo_bytes_backward() : 0;
  }

  // Parameters, their gradients and Adam's moments: what the rank keeps between steps.
  int64_t state_bytes(torch::optim::Adam& adam) const {
    int64_t bytes = 0;
    for (const auto& p : net_->parameters())
      bytes += int64_t(p.nbytes()) + (p.grad().defined() ? int64_t(p.grad().nbytes()) : 0);
    for (const auto& [key, state] : adam.state()) {
      const auto& a = static_cast<const torch::optim::AdamParamState&>(*state);
      bytes += int64_t(a.exp_avg().nbytes() + a.exp_avg_sq().nbytes());
    }
    return bytes;
  }

  struct Peak {
    int64_t state = 0, step = 0, halo = 0;  // this rank's
  };
  // A fresh optimiser, one step (gradients and moments allocated, kernels set up), then the
  // measured steady step.
  Peak measure(const Batch& b) {
    const PeakMemoryMeter first;  // as bench pipeline: malloc's mmap threshold fixed before the first step
    torch::optim::Adam adam(net_->parameters(), torch::optim::AdamOptions(1e-4));
    grid_.world().barrier();
    step(b, adam);
    Peak p;
    p.state = state_bytes(adam);
    const int64_t halo_before = halo_bytes();
    const PeakMemoryMeter steady;
    step(b, adam);
    p.step = steady.peak_increase();
    p.halo = halo_bytes() - halo_before;
    return p;
  }

  // Median over `steps` steps (after one warm-up) of the slowest rank's seconds.
  double step_seconds(const Batch& b, int steps) {
    torch::optim::Adam adam(net_->parameters(), torch::optim::AdamOptions(1e-4));
    std::vector<double> seconds;
    for (int i = 0; i <= steps; ++i) {
      grid_.world().barrier();
      const auto t0 = std::chrono::steady_clock::now();
      step(b, adam);
      torch::Tensor t = torch::tensor({std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
                                      torch::kDouble);
      grid_.world().allreduce(t, parallel::ReduceOp::kMax);
      if (i > 0) seconds.push_back(t.item<double>());
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
  }

 private:
  UNet net_;
  parallel::ProcessGrid& grid_;
  std::unique_ptr<parallel::SpatialTrainHooks> hooks_;
  LossOptions loss_;
};

// Every rank's value, on every rank.
std::vector<int64_t> per_rank(parallel::Communicator& world, int64_t mine) {
  torch::Tensor all = torch::zeros({world.size()}, torch::kInt64);
  all[world.rank()] = mine;
  world.allreduce(all, parallel::ReduceOp::kSum);
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + all.numel());
}

// The planner's per-rank peak (baseline excluded) for `parts` at `side`: one rank runs the
// network without decomposition, so its model is the plain layer model.
int64_t predicted_peak(const UNetOptions& o, int64_t side, const std::vector<int>& parts, int batch) {
  const LayerSequence seq = unet_layer_sequence(o, side);
  const parallel::SpatialPlan plan = parallel::spatial_plan(seq, parts, parallel::SpatialPlanOptions().with_micro_batch(batch));
  if (std::all_of(parts.begin(), parts.end(), [](int p) { return p == 1; })) {
    const int64_t one = stage_bytes(seq, 0, seq.size() - 1, 1, StageMemoryOptions{});
    return plan.state_bytes + (one - plan.state_bytes) * batch;
  }
  return plan.bytes;
}

nlohmann::json worker_measure(const Flags& f, const UNetOptions& o, parallel::ProcessGrid& grid,
                              const SpatialMesh& mesh) {
  parallel::Communicator& world = grid.world();
  torch::manual_seed(0);
  Worker w(o, grid, mesh);
  const Batch b = make_batch(o, f.batch, f.side);
  const double seconds = w.step_seconds(b, f.steps);  // before the meter fixes malloc's mmap threshold
  const Worker::Peak p = w.measure(b);
  return {{"ranks", world.size()},
          {"mesh", mesh.parts},
          {"state_bytes", per_rank(world, p.state)},
          {"step_bytes", per_rank(world, p.step)},
          {"halo_bytes", per_rank(world, p.halo)},
          {"step_seconds", seconds}};
}

// The largest side (a multiple of the alignment, ≥ one alignment unit per block) whose measured
// peak fits `cap` bytes on every rank, searched from the planner's prediction.
nlohmann::json worker_cap(const Flags& f, const UNetOptions& o, parallel::ProcessGrid& grid,
                          const SpatialMesh& mesh, int64_t cap) {
  const int64_t a = unet_alignment(o);
  const int64_t first = a * *std::max_element(mesh.parts.begin(), mesh.parts.end());
  const int64_t j_max = (f.max_side - first) / a;
  if (j_max < 0) throw Error("--max-side: below the smallest side the split accepts (" + std::to_string(first) + ")");
  auto side_of = [&](int64_t j) { return first + j * a; };
  int64_t predicted = 0;
  for (int64_t j = 0; j <= j_max && predicted_peak(o, side_of(j), mesh.parts, f.batch) <= cap; ++j) predicted = side_of(j);
  torch::manual_seed(0);
  Worker w(o, grid, mesh);
  int64_t side = 0, peak = 0, over_side = 0, over_peak = 0;
  int probes = 0;
  auto fits = [&](int64_t j) {
    torch::manual_seed(1);
    const Batch b = make_batch(o, f.batch, side_of(j));
    const Worker::Peak p = w.measure(b);
    torch::Tensor most = torch::tensor({p.state + p.step}, torch::kInt64);
    grid.world().allreduce(most, parallel::ReduceOp::kMax);
    const int64_t m = most.item<int64_t>();
    ++probes;
    if (grid.world().rank() == 0)
      std::fprintf(stderr, "  P = %d: side %lld peak %.1f MiB (%s)\n", grid.world().size(), (long long)side_of(j), mib(m),
                   m <= cap ? "fits" : "over");
    if (m <= cap && side_of(j) > side) std::tie(side, peak) = std::pair(side_of(j), m);
    if (m > cap && (over_side == 0 || side_of(j) < over_side)) std::tie(over_side, over_peak) = std::pair(side_of(j), m);
    return m <= cap;
  };
  largest_fitting(predicted ? (predicted - first) / a : 0, j_max, fits);
  return {{"ranks", grid.world().size()}, {"mesh", mesh.parts},       {"side", side},
          {"peak_bytes", peak},           {"over_side", over_side},   {"over_peak_bytes", over_peak},
          {"predicted_side", predicted},  {"probes", probes}};
}

void run_worker(const Flags& f) {
  const UNetOptions o = resolve_model(f);
  parallel::Communicator& world = parallel::world();
  const auto mesh = SpatialMesh::parse(f.worker_mesh, o.dims, "--worker-mesh");
  if (mesh.size() != world.size())
    throw Error("--worker-mesh " + f.worker_mesh + ": " + std::to_string(mesh.size()) + " blocks for " +
                std::to_string(world.size()) + " ranks");
  parallel::ProcessGrid grid(world, parallel::GridShape().with_spatial(world.size()));
  configure_threads(f.threads);
  nlohmann::json out;
  if (f.worker == "measure")
    out = worker_measure(f, o, grid, mesh);
  else if (f.worker == "cap" && f.memory_cap_mib)
    out = worker_cap(f, o, grid, mesh, int64_t(*f.memory_cap_mib * double(1 << 20)));
  else
    throw Error("--worker: '" + f.worker + "' is not measure or cap (with --memory-cap)");
  if (world.rank() == 0) std::cout << out.dump() << std::endl;
}

// ---- the driver: launches the workers, prints the tables ----------------------------------

// Runs `tessera <args>` on P ranks (mpirun unless P = 1) and returns its last JSON line.
nlohmann::json launch(const Flags& f, int ranks, const std::vector<std::string>& args, const std::string& what) {
  return last_json(run_ranks(f.mpirun, ranks, args, "bench spatial: " + what).out, "bench spatial: " + what);
}

std::vector<std::string> worker_args(const Flags& f, const UNetOptions& o, const std::string& task,
                                     const std::vector<int>& parts) {
  std::vector<std::string> args{"bench", "spatial", "--worker", task, "--worker-mesh", mesh_text(parts)};
  for (const std::string& a : model_flags(f, o)) args.push_back(a);
  for (const std::string& a : {std::string("--side"), std::to_string(f.side), std::string("--batch"),
                               std::to_string(f.batch), std::string("--steps"), std::to_string(f.steps),
                               std::string("--threads"), std::to_string(f.threads), std::string("--max-side"),
                               std::to_string(f.max_side)})
    args.push_back(a);
  if (f.memory_cap_mib) args.insert(args.end(), {"--memory-cap", fmt::format("{}", *f.memory_cap_mib)});
  return args;
}

std::vector<std::vector<int>> layouts(const Flags& f, int dims) {
  std::vector<std::vector<int>> out;
  for (int p : f.ranks) {
    if (p < 1) throw Error("--ranks: every P must be >= 1");
    out.push_back(SpatialMesh::along_first_axis(p, dims).parts);
  }
  for (const std::string& m : f.meshes)
    if (!m.empty()) out.push_back(SpatialMesh::parse(m, dims, "--mesh").parts);
  return out;
}

struct Measured {
  std::vector<int> parts;
  int64_t peak = 0, predicted = 0, halo = 0, predicted_halo = 0;
  bool halo_equal = true;
  double seconds = 0;
};

Measured measure_layout(const Flags& f, const UNetOptions& o, const LayerSequence& seq, const std::vector<int>& parts) {
  const SpatialMesh mesh{parts};
  const nlohmann::json j = launch(f, mesh.size(), worker_args(f, o, "measure", parts), "P = " + mesh.describe());
  const auto state = j.at("state_bytes").get<std::vector<int64_t>>(), step = j.at("step_bytes").get<std::vector<int64_t>>();
  const auto halo = j.at("halo_bytes").get<std::vector<int64_t>>();
  const parallel::SpatialPlan plan =
      parallel::spatial_plan(seq, parts, parallel::SpatialPlanOptions().with_micro_batch(f.batch));
  Measured m;
  m.parts = parts;
  for (size_t r = 0; r < state.size(); ++r) m.peak = std::max(m.peak, state[r] + step[r]);
  m.predicted = predicted_peak(o, f.side, parts, f.batch);
  for (size_t r = 0; r < halo.size(); ++r) {
    m.halo += halo[r];
    m.halo_equal = m.halo_equal && halo[r] == plan.rank_halo_bytes[r];
  }
  m.predicted_halo = plan.halo_bytes;
  m.seconds = j.at("step_seconds").get<double>();
  return m;
}

std::string block_text(const UNetOptions& o, int64_t side, const std::vector<int>& parts) {
  std::string s;
  for (int p : parts)
    s += (s.empty() ? "" : "×") + std::to_string(block_offsets(side, p, unet_alignment(o), "--side")[1]);
  return s;
}

// Every layout's measured peak, step time and halo bytes against the planner's (one table row
// each); their JSON rows into report["layouts"].
void measure_layouts(const Flags& f, const UNetOptions& o, const LayerSequence& seq, nlohmann::json& report) {
  std::printf("  %5s %6s %11s %9s %9s %7s %8s %11s %11s %6s\n", "ranks", "mesh", "block", "peak MiB", "predicted",
              "× P=1", "step s", "halo MiB", "predicted", "equal");
  int64_t one_rank = 0;
  bool all_equal = true;
  double worst_p4 = 0;
  for (const auto& parts : layouts(f, o.dims)) {
    const Measured m = measure_layout(f, o, seq, parts);
    const int p = SpatialMesh{parts}.size();
    if (p == 1 && one_rank == 0) one_rank = m.peak;
    const double ratio = one_rank ? double(m.peak) / double(one_rank) : 0;
    if (p == 4) worst_p4 = std::max(worst_p4, ratio);
    all_equal = all_equal && m.halo_equal;
    std::printf("  %5d %6s %11s %9.1f %9.1f %7.3f %8.3f %11.3f %11.3f %6s\n", p, mesh_text(parts).c_str(),
                block_text(o, f.side, parts).c_str(), mib(m.peak), mib(m.predicted), ratio, m.seconds, mib(m.halo),
                mib(m.predicted_halo), m.halo_equal ? "yes" : "NO");
    std::fflush(stdout);
    report["layouts"].push_back({{"ranks", p}, {"mesh", parts}, {"peak_bytes", m.peak}, {"predicted_bytes", m.predicted},
                                 {"ratio_to_one_rank", ratio}, {"step_seconds", m.seconds}, {"halo_bytes", m.halo},
                                 {"predicted_halo_bytes", m.predicted_halo}, {"halo_equal", m.halo_equal}});
  }
  report["halo_equal"] = all_equal;
  if (worst_p4 > 0)
    std::printf("  per-rank peak at P = 4: %.3f × one rank (done-when: <= 0.35, %s)\n", worst_p4,
                worst_p4 <= 0.35 ? "holds" : "missed");
  std::printf("  halo bytes per step, measured vs planner (rank by rank): %s\n", all_equal ? "equal" : "DIFFERENT");
}

// The largest side within --memory-cap for each --ranks, measured by the workers; returns the
// largest rank count.
int64_t search_sides(const Flags& f, const UNetOptions& o, nlohmann::json& report) {
  std::printf("largest trainable input side within %.0f MiB per rank (measured peak as above; batch %d; sides "
              "multiples of %lld up to %lld)\n",
              *f.memory_cap_mib, f.batch, (long long)unet_alignment(o), (long long)f.max_side);
  std::printf("  %5s %6s %8s %9s %9s %15s %10s %6s\n", "ranks", "mesh", "side", "× P=1", "peak MiB", "over: side/MiB",
              "predicted", "probes");
  int64_t one_side = 0, largest_p = 0;
  double side_ratio_p4 = 0;
  for (int p : f.ranks) {
    const auto parts = SpatialMesh::along_first_axis(p, o.dims).parts;
    const nlohmann::json j = launch(f, p, worker_args(f, o, "cap", parts), "--memory-cap search on " + std::to_string(p) + " ranks");
    const int64_t side = j.at("side").get<int64_t>(), over = j.at("over_side").get<int64_t>();
    if (p == 1) one_side = side;
    const double ratio = one_side ? double(side) / double(one_side) : 0;
    if (p == 4) side_ratio_p4 = ratio;
    largest_p = std::max<int64_t>(largest_p, p);
    const std::string over_text =
        over ? fmt::format("{}/{:.1f}", over, mib(j.at("over_peak_bytes").get<int64_t>())) : std::string("none");
    std::printf("  %5d %6s %8lld %9.3f %9.1f %15s %10lld %6d\n", p, mesh_text(parts).c_str(), (long long)side, ratio,
                mib(j.at("peak_bytes").get<int64_t>()), over_text.c_str(), (long long)j.at("predicted_side").get<int64_t>(),
                j.at("probes").get<int>());
    std::fflush(stdout);
    nlohmann::json row = j;
    row["ratio_to_one_rank"] = ratio;
    report["memory_cap"]["spatial"].push_back(row);
  }
  report["memory_cap"]["cap_bytes"] = int64_t(*f.memory_cap_mib * double(1 << 20));
  if (side_ratio_p4 > 0)
    std::printf("  largest side at P = 4: %.2f × one rank (done-when: >= 1.8, %s)\n", side_ratio_p4,
                side_ratio_p4 >= 1.8 ? "holds" : "missed");
  return largest_p;
}

// The pipeline's largest sides for the same model and cap (--pipeline), or its command.
void compare_pipeline(const Flags& f, const UNetOptions& o, int64_t largest_p, nlohmann::json& report) {
  std::vector<std::string> pipe{"bench", "pipeline"};
  for (const std::string& a : model_flags(f, o)) pipe.push_back(a);
  for (const std::string& a : {std::string("--tile"), std::to_string(unet_alignment(o)), std::string("--batch"),
                               std::to_string(f.batch), std::string("--threads"), std::to_string(f.threads),
                               std::string("--no-time"), std::string("--no-memory"), std::string("--memory-cap"),
                               fmt::format("{}", *f.memory_cap_mib), std::string("--max-side"), std::to_string(f.max_side)})
    pipe.push_back(a);
  std::string command = fmt::format("{} -np {} tessera", f.mpirun, largest_p);
  for (const std::string& a : pipe) command += " " + a;
  if (!f.pipeline || largest_p < 2) {
    std::printf("  pipeline for comparison (same model and cap): %s\n", command.c_str());
  } else {
    const nlohmann::json j = launch(f, int(largest_p), pipe, "bench pipeline");
    for (const auto& row : j.at("memory_cap").at("layouts"))
      std::printf("  pipeline %-7s K = %d: side %lld (peak %.1f MiB)\n", row.at("layout").get<std::string>().c_str(),
                  row.at("ranks").get<int>(), (long long)row.at("largest_side").get<int64_t>(),
                  mib(row.at("peak_bytes").get<int64_t>()));
    report["memory_cap"]["pipeline"] = j.at("memory_cap").at("layouts");
    std::printf("  (%s)\n", command.c_str());
  }
}

void run_driver(const Flags& f) {
  if (f.batch < 1 || f.steps < 1 || f.threads < 1) throw Error("--batch, --steps and --threads must be >= 1");
  const UNetOptions o = resolve_model(f);
  const LayerSequence seq = unet_layer_sequence(o, f.side);
  nlohmann::json report{{"model", f.model.preset}, {"options", o}, {"side", f.side}, {"batch", f.batch},
                        {"threads_per_rank", f.threads}, {"steps", f.steps}};
  std::printf("bench spatial: %s (%s padding, norm %s), input side %lld, batch %d, %d thread(s) per rank, median of %d "
              "steps; state (parameters, gradients, Adam) %.1f MiB per rank\n",
              f.model.preset.c_str(), to_string(o.padding).c_str(), to_string(o.norm).c_str(), (long long)f.side, f.batch,
              f.threads, f.steps, mib(16 * seq.parameter_count()));
  measure_layouts(f, o, seq, report);
  if (f.memory_cap_mib) compare_pipeline(f, o, search_sides(f, o, report), report);
  std::cout << report.dump() << std::endl;
}

}  // namespace

void register_bench_spatial(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("spatial", "Spatial parallelism: per-rank memory, step time, halo bytes against "
                                              "the planner, largest side under a memory cap (launches mpirun)");
  static Flags f;
  f.model.preset = "unet-small";
  f.model.add_to(cmd);
  cmd->add_option("--side", f.side, "Input tile side of the memory and time table (split into blocks)")->capture_default_str();
  cmd->add_option("--ranks", f.ranks, "Ranks P, each layout split along the first axis")->delimiter(',')->capture_default_str();
  cmd->add_option("--mesh", f.meshes, "Further layouts as meshes (2x2, 2x2x1); '' for none")->delimiter(',')->capture_default_str();
  cmd->add_option("--batch", f.batch, "Tiles per step")->capture_default_str();
  cmd->add_option("--steps", f.steps, "Timed steps per layout (after one warm-up)")->capture_default_str();
  cmd->add_option("--threads", f.threads, "LibTorch threads per rank")->capture_default_str();
  cmd->add_option("--memory-cap", f.memory_cap_mib, "MiB per rank: the largest trainable input side for each P of --ranks");
  cmd->add_option("--max-side", f.max_side, "Largest input side --memory-cap tries")->capture_default_str();
  cmd->add_flag("--pipeline", f.pipeline, "With --memory-cap: also run `tessera bench pipeline --memory-cap` on the largest P");
  cmd->add_option("--mpirun", f.mpirun, "MPI launcher")->capture_default_str();
  cmd->add_option("--worker", f.worker)->group("");  // internal: a launched layout
  cmd->add_option("--worker-mesh", f.worker_mesh)->group("");
  cmd->callback([] { f.worker.empty() ? run_driver(f) : run_worker(f); });
}

}  // namespace tessera::cli
