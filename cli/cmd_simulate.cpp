// tessera simulate --cluster clusters/summit.yaml --model s0-small --image 10000x10000 --nodes 200
//                  --dp 1200 [--pp K] [--sp P] --micro-batches M --tile S [--infer] [--gantt out.svg] [--json]
// A discrete-event simulation of one pass (a training epoch, or inference over the images) of
// a layout on a described cluster (parallel/simulator.hpp, clusters/*.yaml): time per pass
// with its breakdown, per-device peak memory, optionally the step's Gantt chart as SVG.
// --seed-tables prints the seed paper's pipeline experiments as predictions: on one node,
// the speed-up of 1 … 6 pipeline stages at a 1434² tile with 2 micro-batches per stage, and
// the 6-stage speed-up at tile sides 192, 512 and 1024.
#include <cmath>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/engine/calibration.hpp"
#include "tessera/engine/layout_json.hpp"
#include "commands.hpp"
#include "model_options.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/model_registry.hpp"
#include "tessera/parallel/plan/cluster.hpp"
#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::cli {

using namespace ::tessera::engine;  // the engine library (engine/): transitional, until the command is thin
namespace {

struct Flags {
  std::string cluster;
  ModelFlags model;
  std::string image = "10000x10000";
  int64_t images = 1;
  std::optional<int64_t> tiles;
  std::optional<int> nodes;
  int dp = 1, pp = 1, sp = 1, micro_batches = 1, tiles_per_micro_batch = 1;
  int64_t tile = 512;
  std::string schedule = "gpipe", balance = "time", precision = "fp32";
  bool infer = false, json = false, seed_tables = false, adam = false;
  double per_tile_overhead = 0;
  std::string gantt, calibration;
};

CalibratedCluster resolve_cluster(const Flags& f, const UNetOptions& model) {
  const auto path = calibration_path(f.calibration);
  CalibratedCluster out =
      load_calibrated_cluster(f.cluster, model_calibration(read_calibration(path), path, f.model.preset, model),
                              f.model.preset, path);
  parallel::ClusterModel& c = out.cluster;
  if (f.nodes) {
    if (*f.nodes < 1 || *f.nodes > c.nodes)
      throw Error(fmt::format("--nodes must be in 1..{} ({}), got {}", c.nodes, f.cluster, *f.nodes));
    c.nodes = *f.nodes;
  }
  return out;
}

parallel::SimulationOptions options_for(const Flags& f, const UNetOptions& model, int64_t side,
                                        const parallel::LayerTimeCalibration& times) {
  LayerSequence seq = parallel::simulated_layer_sequence(model, side);
  int64_t tiles = f.images;
  for (int64_t e : parse_image(f.image)) tiles *= (e + seq.output_side - 1) / seq.output_side;
  if (f.tiles) tiles = *f.tiles;
  std::vector<double> measured = times.empty() ? std::vector<double>{} : times.seconds(seq);
  return parallel::SimulationOptions(std::move(seq))
      .with_layer_train_seconds(std::move(measured))
      .with_tiles_per_micro_batch(f.tiles_per_micro_batch)
      .with_optimizer_step(f.adam)
      .with_tiles(tiles)
      .with_data_parallel(f.dp)
      .with_pipeline_stages(f.pp)
      .with_spatial(f.sp)
      .with_micro_batches(f.micro_batches)
      .with_schedule(parse_pipeline_schedule(f.schedule))
      .with_balance(parallel::parse_balance_strategy(f.balance))
      .with_training(!f.infer)
      .with_precision(parse_precision(f.precision))
      .with_per_tile_overhead_seconds(f.per_tile_overhead);
}

void print(const parallel::SimulationResult& r, const parallel::SimulationOptions& o, const parallel::ClusterModel& c,
           const std::string& model) {
  const auto& b = r.breakdown;
  const int devices = o.data_parallel * o.pipeline_stages * o.spatial;
  std::cout << fmt::format("simulate {} on {} ({} nodes × {} {}), {}, {}\n", model, c.name, c.nodes,
                           c.devices_per_node, c.device.name, o.training ? "training" : "inference",
                           to_string(o.precision));
  std::cout << fmt::format("  layout        dp {} × pp {} × sp {} = {} devices, M = {}, {}, balance {{{}}}\n",
                           o.data_parallel, o.pipeline_stages, o.spatial, devices, o.micro_batches,
                           to_string(o.schedule), fmt::join(r.balance, ", "));
  std::cout << fmt::format("  tiles         input side {}, {} tiles per pass, {} steps\n", o.sequence.input_side,
                           o.tiles, r.steps);
  std::cout << fmt::format("  one tile      {:.3g} TFLOP {}, {:.3f} s on one device ({:.1f}% of peak)\n",
                           r.tile_flops / 1e12, o.training ? "forward + backward" : "forward", r.tile_seconds,
                           100 * r.tile_flops / r.tile_seconds / c.device.peak_flops(o.precision));
  std::cout << fmt::format("  step          {:.4g} s\n", r.step_seconds);
  std::cout << fmt::format("  pass          {:.4g} s = compute {:.4g} + bubble {:.4g} + halo {:.4g} + allreduce {:.4g} "
                           "+ io {:.4g}{}\n",
                           r.pass_seconds, b.compute, b.bubble, b.halo, b.allreduce, b.io,
                           o.optimizer_step ? fmt::format(" + optimizer {:.4g}", b.optimizer) : "");
  std::vector<std::string> gib;
  for (int64_t m : r.device_peak_bytes) gib.push_back(fmt::format("{:.2f}", m / double(1 << 30)));
  std::cout << fmt::format("  memory        {} GiB per stage device of {:.1f}{}\n", fmt::join(gib, ", "),
                           c.device.memory_bytes / double(1 << 30), r.fits_memory ? "" : "  — DOES NOT FIT");
}

// The seed's pipeline experiments on one node: speed-up = tiles/s with K stages ÷ tiles/s
// with one, M = 2K micro-batches (2 per partition), GPipe, stages balanced by time.
void print_seed_tables(const Flags& f, const UNetOptions& model, parallel::ClusterModel c,
                       const parallel::LayerTimeCalibration& times) {
  c.nodes = 1;
  const int k_max = std::min(6, c.devices_per_node);
  auto throughput = [&](int64_t side, int k) {
    Flags g = f;
    g.dp = 1;
    g.sp = 1;
    g.pp = k;
    g.micro_batches = 2 * k;
    g.schedule = "gpipe";
    const parallel::SimulationOptions o = options_for(g, model, side, times);
    const parallel::SimulationResult r = parallel::simulate(o, c);
    return std::pair{g.micro_batches / r.step_seconds, r.fits_memory};
  };
  std::cout << fmt::format("pipeline speed-up on one {} node ({} × {}), {} training, M = 2 per stage, GPipe:\n",
                           c.name, c.devices_per_node, c.device.name, f.model.preset);
  const auto [base, base_fits] = throughput(1434, 1);
  for (int k = 1; k <= k_max; ++k) {
    const auto [t, fits] = throughput(1434, k);
    std::cout << fmt::format("  tile 1434, K = {}: {:.2f}×{}\n", k, t / base, fits ? "" : " (does not fit memory)");
  }
  for (int64_t side : {192, 512, 1024}) {
    const auto [one, one_fits] = throughput(side, 1);
    const auto [t, fits] = throughput(side, k_max);
    std::cout << fmt::format("  tile {}, K = {}: {:.2f}×{}\n", side, k_max, t / one, fits ? "" : " (does not fit memory)");
  }
}

void run(const Flags& f) {
  if (f.cluster.empty()) throw Error("--cluster is required (e.g. clusters/summit.yaml)");
  // The seed's U-Nets (plugin s0-…) predict one logit (classes 1), which UNetOptions::validate
  // refuses for the built-in family; seed_unet_layer_sequence checks them instead.
  UNetOptions model = model_preset(f.model.preset);
  f.model.overrides.apply(model);
  if (model.name.rfind("s0-", 0) != 0) model = f.model.resolve();
  const CalibratedCluster rc = resolve_cluster(f, model);
  const parallel::ClusterModel& c = rc.cluster;
  if (f.seed_tables) return print_seed_tables(f, model, c, rc.times);
  const parallel::SimulationOptions o = options_for(f, model, f.tile, rc.times);
  const parallel::SimulationResult r = parallel::simulate(o, c);
  if (f.json) {
    std::cout << simulation_json(r, o).dump(2) << "\n";
  } else {
    print(r, o, c, f.model.preset);
  }
  if (!f.gantt.empty()) {
    std::ofstream out(f.gantt);
    out << parallel::gantt_svg(r.events, fmt::format("{} on {}: one step, dp {} × pp {}, M = {}", f.model.preset,
                                                     c.name, f.dp, f.pp, f.micro_batches));
    if (!out) throw Error("cannot write --gantt " + f.gantt);
  }
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("simulate", "Simulate one pass of a layout on a described cluster (clusters/*.yaml)");
  cmd->add_option("--cluster", flags->cluster, "Cluster description (YAML), e.g. clusters/summit.yaml");
  flags->model.add_to(cmd);
  cmd->add_option("--image", flags->image, "Image extent WxH or WxHxD")->capture_default_str();
  cmd->add_option("--images", flags->images, "Images per pass")->capture_default_str();
  cmd->add_option("--tiles", flags->tiles, "Tiles per pass (overrides --image / --images)");
  cmd->add_option("--nodes", flags->nodes, "Nodes used (default: the cluster's)");
  cmd->add_option("--dp", flags->dp, "Data-parallel replicas")->capture_default_str();
  cmd->add_option("--pp", flags->pp, "Pipeline stages per replica")->capture_default_str();
  cmd->add_option("--sp", flags->sp, "Spatial ranks per tile (same padding; not with --pp)")->capture_default_str();
  cmd->add_option("--micro-batches", flags->micro_batches, "Micro-batches per step and replica")->capture_default_str();
  cmd->add_option("--batch", flags->tiles_per_micro_batch, "Tiles per micro-batch")->capture_default_str();
  cmd->add_flag("--adam", flags->adam, "Add the Adam update after the allreduce (training)");
  cmd->add_option("--tile", flags->tile, "Network input side per tile")->capture_default_str();
  cmd->add_option("--schedule", flags->schedule, "gpipe or 1f1b")->capture_default_str();
  cmd->add_option("--balance", flags->balance, "Stage balance: time, memory or naive")->capture_default_str();
  cmd->add_option("--precision", flags->precision, "fp32, fp16 or bf16")->capture_default_str();
  cmd->add_option("--per-tile-overhead", flags->per_tile_overhead, "Host seconds per tile (window extraction, stitching)");
  cmd->add_flag("--infer", flags->infer, "Inference (forward only) instead of training");
  cmd->add_option("--gantt", flags->gantt, "Write the step's schedule as an SVG Gantt chart");
  cmd->add_flag("--json", flags->json, "Print the result as JSON");
  cmd->add_flag("--seed-tables", flags->seed_tables,
                "Print the seed's pipeline experiments on one node: speed-up of 1…6 stages at 1434², "
                "and of 6 stages at 192, 512, 1024");
  cmd->add_option("--calibration", flags->calibration, "Calibration file (default ~/.cache/tessera/calibration.json)");
  cmd->callback([flags] { run(*flags); });
}

}  // namespace tessera::cli
