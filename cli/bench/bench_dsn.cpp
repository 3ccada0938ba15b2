// tessera bench dsn: the per-rank peak memory of domain-parallel Domain Separation Network
// training (parallel/domain_hooks.hpp, one domain per rank) for 1 source + N targets, beside
// the one-process DSN of the same domains. Run without mpirun; for every N of --targets it
// launches
//   mpirun -np 1+N tessera bench dsn --worker-domains 1+N …   (domain parallel)
//   tessera bench dsn --worker-domains 1+N …                  (one process, every domain)
// and reads back the worker's JSON line. A worker trains --steps DSN steps (the one trainer, train(Dsn&, …): no
// observer, no progress, checkpoints only the collective one at the last step) on synthetic
// domains whose pixels are computed when read, so the data costs no memory, and reports per
// rank:
//   peak     PeakMemoryMeter's peak resident increase from before the Dsn is built to the
//            end of training: parameters, gradients, Adam moments, activations, the tile
//            loader's queue, and rank 0's gathering of every private encoder for the final
//            checkpoint;
//   params   parameters the rank holds: the shared ones and its own domains' private encoders;
//   s/step   the training's wall time over its steps (the slowest rank), first step included.
// The model: the --model preset with `same` padding, group norm, 4 input bands and 4 classes
// (a satellite-scene-like set-up). Flatness: the largest per-rank peak of each row against
// the others; domain parallelism should keep it flat as targets are added.
#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "bench_dsn_worker.hpp"
#include "child_process.hpp"
#include "tessera/core/dsn_spec.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/parallel/comm/runtime.hpp"

namespace tessera::bench {

void BenchDsnOptions::validate() const {
  if (batch < 1 || steps < 1 || threads < 1) throw Error("--batch, --steps and --threads must be >= 1");
  if (side < 1) throw Error("--side: must be >= 1, got " + std::to_string(side));
  if (targets.empty()) throw Error("--targets: give at least one target count");
  for (int n : targets)
    if (n < 1) throw Error("--targets: every target count must be >= 1");
  with_flag("--similarity", [&] { parse_similarity(similarity); });
  if (worker_domains < 0) throw Error("--worker-domains: must be >= 0");
}

namespace {

std::vector<std::string> worker_args(const BenchDsnOptions& f, int domains) {
  std::vector<std::string> args{"bench", "dsn", "--worker-domains", std::to_string(domains), "--model", f.model,
                                "--side", std::to_string(f.side), "--batch", std::to_string(f.batch), "--steps",
                                std::to_string(f.steps), "--threads", std::to_string(f.threads), "--similarity",
                                f.similarity};
  if (!f.channels_last) args.push_back("--no-channels-last");
  return args;
}

// Runs the worker for `domains` domains on `ranks` ranks (mpirun unless 1) and returns its
// last JSON line.
nlohmann::json launch(const BenchDsnOptions& f, int domains, int ranks) {
  const std::string what = fmt::format("bench dsn: 1 + {} domains on {} rank(s)", domains - 1, ranks);
  return cli::last_json(cli::run_ranks(f.mpirun, ranks, worker_args(f, domains), what).out, what);
}

std::string range_text(int64_t lo, int64_t hi, bool as_mib) {
  const auto one = [&](int64_t v) { return as_mib ? fmt::format("{:.1f}", mib(v)) : std::to_string(v); };
  return lo == hi ? one(lo) : one(lo) + "–" + one(hi);
}

std::string reproduce_command(const BenchDsnOptions& f) {
  return fmt::format("tessera bench dsn --model {} --side {} --batch {} --steps {} --threads {} --targets {} "
                     "--similarity {}{}{}",
                     f.model, f.side, f.batch, f.steps, f.threads, join(f.targets), f.similarity,
                     f.channels_last ? "" : " --no-channels-last", f.mpirun == "mpirun" ? "" : " --mpirun " + f.mpirun);
}

void run_driver(const BenchDsnOptions& f) {
  const UNetOptions o = dsn_bench_model(f.model);
  std::printf("DSN memory per rank (%s %s/%s, tile %lld, batch %d per domain, %d steps, %s similarity, %s, %d "
              "thread(s) per rank)\n",
              f.model.c_str(), to_string(o.padding).c_str(), to_string(o.norm).c_str(), (long long)f.side, f.batch,
              f.steps, f.similarity.c_str(), f.channels_last ? "channels-last" : "contiguous", f.threads);
  // fmt pads by code points: the en dashes line up.
  fmt::print("{:<8} {:>5}  {:>27}  {:>11}  {:>18}  {:>17}  {:>11}\n", "domains", "ranks", "per-rank peak MiB (min–max)",
             "params/rank", "single process MiB", "ratio single/rank", "s/step dp|1");
  std::fflush(stdout);
  nlohmann::json report{{"model", f.model}, {"options", o},       {"side", f.side},
                        {"batch", f.batch}, {"steps", f.steps},   {"similarity", f.similarity},
                        {"channels_last", f.channels_last}};
  int64_t lowest_row = 0, highest_row = 0, lowest_rank = 0, highest_rank = 0;
  for (int n : f.targets) {
    const int domains = 1 + n;
    const nlohmann::json dp = launch(f, domains, domains);
    const nlohmann::json one = launch(f, domains, 1);
    const auto peaks = dp.at("peak_bytes").get<std::vector<int64_t>>();
    const auto params = dp.at("parameters").get<std::vector<int64_t>>();
    const auto [lo, hi] = std::minmax_element(peaks.begin(), peaks.end());
    const auto [plo, phi] = std::minmax_element(params.begin(), params.end());
    const int64_t single = one.at("peak_bytes").at(0).get<int64_t>();
    const double ratio = double(single) / double(*hi);
    fmt::print("{:<8} {:>5}  {:>27}  {:>11}  {:>18.1f}  {:>17.2f}  {:>11}\n", fmt::format("1 + {}", n), domains,
               range_text(*lo, *hi, true), range_text(*plo, *phi, false), mib(single), ratio,
               fmt::format("{:.2f}|{:.2f}", dp.at("step_seconds").get<double>(), one.at("step_seconds").get<double>()));
    std::fflush(stdout);
    lowest_row = lowest_row ? std::min(lowest_row, *hi) : *hi;
    highest_row = std::max(highest_row, *hi);
    lowest_rank = lowest_rank ? std::min(lowest_rank, *lo) : *lo;
    highest_rank = std::max(highest_rank, *hi);
    report["rows"].push_back({{"targets", n},
                              {"ranks", domains},
                              {"peak_bytes", peaks},
                              {"parameters", params},
                              {"step_seconds", dp.at("step_seconds")},
                              {"single_peak_bytes", single},
                              {"single_parameters", one.at("parameters").at(0)},
                              {"single_step_seconds", one.at("step_seconds")},
                              {"ratio_single_to_rank", ratio}});
  }
  const double flatness = double(highest_row) / double(lowest_row);
  std::printf("flatness: largest per-rank peak / smallest over the rows = %.3f  (target ≤ 1.05, %s); over every rank "
              "of every row %.3f\n",
              flatness, flatness <= 1.05 ? "holds" : "missed", double(highest_rank) / double(lowest_rank));
  std::printf("reproduce: %s\n", reproduce_command(f).c_str());
  report["flatness"] = flatness;
  report["flatness_all_ranks"] = double(highest_rank) / double(lowest_rank);
  if (f.json) std::cout << report.dump() << std::endl;
}

}  // namespace

void run_bench_dsn(const BenchDsnOptions& f) {
  f.validate();
  if (f.worker_domains <= 0) return run_driver(f);
  const nlohmann::json out = run_dsn_worker(f);
  if (parallel::world().rank() == 0) std::cout << out.dump() << std::endl;
}

}  // namespace tessera::bench
