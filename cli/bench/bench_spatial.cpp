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
#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "bench_spatial_worker.hpp"
#include "child_process.hpp"
#include "model_options.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/core/layer_sequence.hpp"
#include "tessera/parallel/modes/spatial.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"

namespace tessera::bench {

void BenchSpatialOptions::validate() const {
  if (batch < 1 || steps < 1 || threads < 1) throw Error("--batch, --steps and --threads must be >= 1");
  if (side < 1) throw Error("--side: must be >= 1, got " + std::to_string(side));
  for (int p : ranks)
    if (p < 1) throw Error("--ranks: every P must be >= 1");
  if (!(memory_cap >= 0)) throw Error("--memory-cap: must be > 0 MiB (0: no search)");
  if (!worker.empty() && worker != "measure" && !(worker == "cap" && memory_cap > 0))
    throw Error("--worker: '" + worker + "' is not measure or cap (with --memory-cap)");
}

UNetOptions spatial_bench_model(const cli::ModelFlags& flags) {
  UNetOptions o = flags.resolve();
  if (!flags.given("padding")) o.padding = Padding::kSame;
  if (!flags.given("norm")) o.norm = Norm::kGroup;
  o.validate();
  return o;
}

namespace {

// The resolved model as flags (--levels 4 --padding same …), for the launched commands.
std::vector<std::string> model_flags(const BenchSpatialOptions& f, const UNetOptions& o) {
  std::vector<std::string> args{"--model", f.model_preset};
  const nlohmann::json fields = o;
  for (const auto& [key, value] : fields.items()) {
    args.push_back(cli::flag_name(key));
    args.push_back(value.is_string() ? value.get<std::string>() : value.dump());
  }
  return args;
}

std::string mesh_text(const std::vector<int>& parts) {
  std::string s;
  for (int p : parts) s += (s.empty() ? "" : "x") + std::to_string(p);
  return s;
}

// Runs `tessera <args>` on P ranks (mpirun unless P = 1) and returns its last JSON line.
nlohmann::json launch(const BenchSpatialOptions& f, int ranks, const std::vector<std::string>& args, const std::string& what) {
  return cli::last_json(cli::run_ranks(f.mpirun, ranks, args, "bench spatial: " + what).out, "bench spatial: " + what);
}

std::vector<std::string> worker_args(const BenchSpatialOptions& f, const UNetOptions& o, const std::string& task,
                                     const std::vector<int>& parts) {
  std::vector<std::string> args{"bench", "spatial", "--worker", task, "--worker-mesh", mesh_text(parts)};
  for (const std::string& a : model_flags(f, o)) args.push_back(a);
  for (const std::string& a : {std::string("--side"), std::to_string(f.side), std::string("--batch"),
                               std::to_string(f.batch), std::string("--steps"), std::to_string(f.steps),
                               std::string("--threads"), std::to_string(f.threads), std::string("--max-side"),
                               std::to_string(f.max_side)})
    args.push_back(a);
  if (f.memory_cap > 0) args.insert(args.end(), {"--memory-cap", fmt::format("{}", f.memory_cap)});
  return args;
}

std::vector<std::vector<int>> layouts(const BenchSpatialOptions& f, int dims) {
  std::vector<std::vector<int>> out;
  for (int p : f.ranks) out.push_back(SpatialMesh::along_first_axis(p, dims).parts);
  for (const std::string& m : f.mesh)
    if (!m.empty()) out.push_back(SpatialMesh::parse(m, dims, "--mesh").parts);
  return out;
}

struct Measured {
  std::vector<int> parts;
  int64_t peak = 0, predicted = 0, halo = 0, predicted_halo = 0;
  bool halo_equal = true;
  double seconds = 0;
};

Measured measure_layout(const BenchSpatialOptions& f, const UNetOptions& o, const LayerSequence& seq, const std::vector<int>& parts) {
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
void measure_layouts(const BenchSpatialOptions& f, const UNetOptions& o, const LayerSequence& seq, nlohmann::json& report) {
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
int64_t search_sides(const BenchSpatialOptions& f, const UNetOptions& o, nlohmann::json& report) {
  std::printf("largest trainable input side within %.0f MiB per rank (measured peak as above; batch %d; sides "
              "multiples of %lld up to %lld)\n",
              f.memory_cap, f.batch, (long long)unet_alignment(o), (long long)f.max_side);
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
  report["memory_cap"]["cap_bytes"] = int64_t(f.memory_cap * double(1 << 20));
  if (side_ratio_p4 > 0)
    std::printf("  largest side at P = 4: %.2f × one rank (done-when: >= 1.8, %s)\n", side_ratio_p4,
                side_ratio_p4 >= 1.8 ? "holds" : "missed");
  return largest_p;
}

// The pipeline's largest sides for the same model and cap (--pipeline), or its command.
void compare_pipeline(const BenchSpatialOptions& f, const UNetOptions& o, int64_t largest_p, nlohmann::json& report) {
  std::vector<std::string> pipe{"bench", "pipeline"};
  for (const std::string& a : model_flags(f, o)) pipe.push_back(a);
  for (const std::string& a : {std::string("--tile"), std::to_string(unet_alignment(o)), std::string("--batch"),
                               std::to_string(f.batch), std::string("--threads"), std::to_string(f.threads),
                               std::string("--no-time"), std::string("--no-memory"), std::string("--memory-cap"),
                               fmt::format("{}", f.memory_cap), std::string("--max-side"), std::to_string(f.max_side)})
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

void run_driver(const BenchSpatialOptions& f) {
  const UNetOptions& o = f.model;
  const LayerSequence seq = unet_layer_sequence(o, f.side);
  nlohmann::json report{{"model", f.model_preset}, {"options", o}, {"side", f.side}, {"batch", f.batch},
                        {"threads_per_rank", f.threads}, {"steps", f.steps}};
  std::printf("bench spatial: %s (%s padding, norm %s), input side %lld, batch %d, %d thread(s) per rank, median of %d "
              "steps; state (parameters, gradients, Adam) %.1f MiB per rank\n",
              f.model_preset.c_str(), to_string(o.padding).c_str(), to_string(o.norm).c_str(), (long long)f.side, f.batch,
              f.threads, f.steps, mib(16 * seq.parameter_count()));
  measure_layouts(f, o, seq, report);
  if (f.memory_cap > 0) compare_pipeline(f, o, search_sides(f, o, report), report);
  std::cout << report.dump() << std::endl;
}

}  // namespace

void run_bench_spatial(const BenchSpatialOptions& f) {
  f.validate();
  f.worker.empty() ? run_driver(f) : run_spatial_worker(f);
}

}  // namespace tessera::bench
