// tessera bench dsn: the per-rank peak memory of domain-parallel Domain Separation Network
// training (parallel/domain_hooks.hpp, one domain per rank) for 1 source + N targets, beside
// the one-process DSN of the same domains. Run without mpirun; for every N of --targets it
// launches
//   mpirun -np 1+N tessera bench dsn --worker-domains 1+N …   (domain parallel)
//   tessera bench dsn --worker-domains 1+N …                  (one process, every domain)
// and reads back the worker's JSON line. A worker trains --steps DSN steps (train_dsn: no
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
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "child_process.hpp"
#include "commands.hpp"
#include "tessera/core/dsn_trainer.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/unet_spec.hpp"
#include "tessera/parallel/modes/domain_hooks.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

constexpr int kBands = 4, kClasses = 4;

struct Flags {
  std::string model = "unet-tiny";
  int64_t side = 128;
  int batch = 2, steps = 3, threads = 1;
  std::vector<int> targets{1, 3, 7};
  std::string similarity = "dann";
  bool json = false;
  std::string mpirun = "mpirun";
  int worker_domains = 0;  // internal: > 0 in a launched worker, the domains it trains
};

double mib(int64_t bytes) { return double(bytes) / double(1 << 20); }

UNetOptions bench_model(const Flags& f) {
  UNetOptions o = unet_preset(f.model)
                      .with_in_channels(kBands)
                      .with_classes(kClasses)
                      .with_padding(Padding::kSame)
                      .with_norm(Norm::kGroup);
  o.validate();
  return o;
}

// ---- the worker: one DSN training, domain parallel or in one process ----------------------

// A 2-D image whose value at (band, y, x) is a formula: read() computes the window asked
// for, so an image of any extent holds no pixels. Thread safe (read is const and pure).
class ProceduralImage final : public ImageSource {
 public:
  using Formula = std::function<float(int band, int64_t y, int64_t x)>;
  ProceduralImage(std::string name, int64_t side, int bands, Formula value) : value_(std::move(value)) {
    info_.path = std::move(name);
    info_.kind = "raster";
    info_.format = "procedural";
    info_.data_type = "Float32";
    info_.extent = {side, side};
    info_.channels = bands;
    info_.nodata.assign(size_t(bands), std::nullopt);
  }
  const ImageInfo& info() const override { return info_; }
  Block<float> read(const Box& box) const override {
    if (!Box{Index(2, 0), info_.extent}.contains(box)) throw Error(info_.path + ": window outside the image");
    Block<float> out({int64_t(info_.channels), box.size[0], box.size[1]});
    float* v = out.data.data();
    for (int c = 0; c < info_.channels; ++c)
      for (int64_t y = box.origin[0]; y < box.origin[0] + box.size[0]; ++y)
        for (int64_t x = box.origin[1]; x < box.origin[1] + box.size[1]; ++x) *v++ = value_(c, y, x);
    return out;
  }

 private:
  ImageInfo info_;
  Formula value_;
};

// 1 source with labels and D − 1 targets: the same kind of scene seen through another
// "sensor" each (gain 1 + 0.25 d, offset 0.1 d, odd domains with bands 0 and 1 swapped).
struct SyntheticDomains {
  SyntheticDomains(int domains, int64_t extent)
      : labels("synthetic labels", extent, 1, [](int, int64_t y, int64_t x) { return float((y / 16 + x / 24) % kClasses); }) {
    for (int d = 0; d < domains; ++d)
      images.push_back(std::make_unique<ProceduralImage>(
          "synthetic domain " + std::to_string(d), extent, kBands, [d](int c, int64_t y, int64_t x) {
            const int band = d % 2 && c < 2 ? 1 - c : c;
            const float v = std::sin(0.11f * float(y + 5 * d) + float(band)) + std::cos(0.07f * float(x) * float(band + 1));
            return (1.0f + 0.25f * float(d)) * v + 0.1f * float(d);
          }));
    for (int d = 0; d < domains; ++d)
      pairs.push_back({{images[size_t(d)].get(), d == 0 ? &labels : nullptr, Box{{0, 0}, {extent, extent}}}});
  }
  ProceduralImage labels;
  std::vector<std::unique_ptr<ProceduralImage>> images;
  std::vector<std::vector<TrainingPair>> pairs;
};

// Every rank's value, on every rank.
torch::Tensor per_rank(parallel::Communicator& world, double mine) {
  torch::Tensor all = torch::zeros({world.size()}, torch::kDouble);
  all[world.rank()] = mine;
  world.allreduce(all, parallel::ReduceOp::kSum);
  return all;
}

template <class T>
std::vector<T> values(const torch::Tensor& t) {
  std::vector<T> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(T(t[i].item<double>()));
  return out;
}

TrainOptions bench_training(const Flags& f, const std::string& run_dir) {
  TrainOptions t;
  t.tile = f.side;
  t.batch = f.batch;
  t.steps = f.steps;
  t.seed = 1;
  t.progress = false;
  t.checkpoint_every = std::numeric_limits<int32_t>::max();  // only the one at the last step
  t.run_dir = run_dir;
  return t;
}

nlohmann::json run_worker(const Flags& f) {
  parallel::Communicator& world = parallel::world();
  const int domains = f.worker_domains;
  if (world.size() != 1 && world.size() != domains)
    throw Error("bench dsn worker: " + std::to_string(world.size()) + " ranks for " + std::to_string(domains) +
                " domains (one domain per rank, or one process)");
  configure_threads(f.threads);
  const UNetOptions model = bench_model(f);
  DsnOptions dsn;
  dsn.domains = domains;
  dsn.similarity = parse_similarity(f.similarity);
  dsn.validate(model);
  SyntheticDomains data(domains, std::max<int64_t>(4 * f.side, 256));
  std::unique_ptr<parallel::DomainParallelHooks> hooks;
  if (world.size() > 1)
    hooks = std::make_unique<parallel::DomainParallelHooks>(world, parallel::domain_groups(world.size(), domains, 0), domains);
  DsnHooks one_process;
  const std::vector<int> owned = (hooks ? static_cast<DsnHooks&>(*hooks) : one_process).domains(domains);
  const fs::path run_dir =
      fs::temp_directory_path() / fmt::format("tessera-bench-dsn-{}-{}", ::getpid(), world.rank());
  fs::create_directories(run_dir);
  CheckpointMeta meta;
  meta.model = model;
  meta.norm = {std::vector<float>(kBands, 0.f), std::vector<float>(kBands, 1.f)};
  for (int c = 0; c < kClasses; ++c) meta.class_names.push_back("class " + std::to_string(c));

  const PeakMemoryMeter meter;  // before the network: its parameters count in the peak
  Dsn net(model, dsn, owned, 1);
  int64_t parameters = 0;
  for (const auto& p : net->parameters()) parameters += p.numel();
  const TrainReport r = train_dsn(net, data.pairs, bench_training(f, run_dir.string()), meta, hooks.get(), nullptr);
  const int64_t peak = meter.peak_increase();
  fs::remove_all(run_dir);
  torch::Tensor seconds = torch::tensor({r.seconds / double(f.steps)}, torch::kDouble);
  world.allreduce(seconds, parallel::ReduceOp::kMax);
  return {{"domains", domains},
          {"ranks", world.size()},
          {"peak_bytes", values<int64_t>(per_rank(world, double(peak)))},
          {"parameters", values<int64_t>(per_rank(world, double(parameters)))},
          {"step_seconds", seconds.item<double>()}};
}

// ---- the driver: launches the workers, prints the table ----------------------------------

std::vector<std::string> worker_args(const Flags& f, int domains) {
  return {"bench", "dsn", "--worker-domains", std::to_string(domains), "--model", f.model,
          "--side", std::to_string(f.side), "--batch", std::to_string(f.batch), "--steps", std::to_string(f.steps),
          "--threads", std::to_string(f.threads), "--similarity", f.similarity};
}

// Runs the worker for `domains` domains on `ranks` ranks (mpirun unless 1) and returns its
// last JSON line.
nlohmann::json launch(const Flags& f, int domains, int ranks) {
  const std::string what = fmt::format("bench dsn: 1 + {} domains on {} rank(s)", domains - 1, ranks);
  return last_json(run_ranks(f.mpirun, ranks, worker_args(f, domains), what).out, what);
}

std::string range_text(int64_t lo, int64_t hi, bool as_mib) {
  const auto one = [&](int64_t v) { return as_mib ? fmt::format("{:.1f}", mib(v)) : std::to_string(v); };
  return lo == hi ? one(lo) : one(lo) + "–" + one(hi);
}

std::string reproduce_command(const Flags& f) {
  std::string targets;
  for (int n : f.targets) targets += (targets.empty() ? "" : ",") + std::to_string(n);
  return fmt::format("tessera bench dsn --model {} --side {} --batch {} --steps {} --threads {} --targets {} "
                     "--similarity {}{}",
                     f.model, f.side, f.batch, f.steps, f.threads, targets, f.similarity,
                     f.mpirun == "mpirun" ? "" : " --mpirun " + f.mpirun);
}

void run_driver(const Flags& f) {
  if (f.batch < 1 || f.steps < 1 || f.threads < 1) throw Error("--batch, --steps and --threads must be >= 1");
  if (f.targets.empty()) throw Error("--targets: give at least one target count");
  for (int n : f.targets)
    if (n < 1) throw Error("--targets: every target count must be >= 1");
  parse_similarity(f.similarity);
  const UNetOptions o = bench_model(f);
  std::printf("DSN memory per rank (%s %s/%s, tile %lld, batch %d per domain, %d steps, %s similarity, %d thread(s) "
              "per rank)\n",
              f.model.c_str(), to_string(o.padding).c_str(), to_string(o.norm).c_str(), (long long)f.side, f.batch,
              f.steps, f.similarity.c_str(), f.threads);
  // fmt pads by code points: the en dashes line up.
  fmt::print("{:<8} {:>5}  {:>27}  {:>11}  {:>18}  {:>17}  {:>11}\n", "domains", "ranks", "per-rank peak MiB (min–max)",
             "params/rank", "single process MiB", "ratio single/rank", "s/step dp|1");
  std::fflush(stdout);
  nlohmann::json report{{"model", f.model}, {"options", o},       {"side", f.side},
                        {"batch", f.batch}, {"steps", f.steps},   {"similarity", f.similarity}};
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

void register_bench_dsn(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("dsn", "Domain-parallel DSN training: per-rank peak memory for 1 + N domains against "
                                          "one process (launches mpirun)");
  static Flags f;
  cmd->add_option("--model", f.model, "U-Net preset (with same padding, group norm, 4 bands, 4 classes)")
      ->capture_default_str();
  cmd->add_option("--side", f.side, "Training tile side")->capture_default_str();
  cmd->add_option("--batch", f.batch, "Tiles per domain and step")->capture_default_str();
  cmd->add_option("--steps", f.steps, "DSN training steps per run")->capture_default_str();
  cmd->add_option("--targets", f.targets, "Target-domain counts N (1 + N ranks each)")->delimiter(',')->capture_default_str();
  cmd->add_option("--similarity", f.similarity, "dann or mmd")->capture_default_str();
  cmd->add_option("--threads", f.threads, "LibTorch threads per rank")->capture_default_str();
  cmd->add_option("--mpirun", f.mpirun, "MPI launcher")->capture_default_str();
  cmd->add_flag("--json", f.json, "Also print the report as one JSON line");
  cmd->add_option("--worker-domains", f.worker_domains)->group("");  // internal: a launched worker
  cmd->callback([] {
    if (f.worker_domains <= 0) return run_driver(f);
    const nlohmann::json out = run_worker(f);
    if (parallel::world().rank() == 0) std::cout << out.dump() << std::endl;
  });
}

}  // namespace tessera::cli
