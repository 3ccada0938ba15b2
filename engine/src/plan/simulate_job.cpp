#include "tessera/engine/simulate_job.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "tessera/core/error.hpp"
#include "tessera/engine/calibration.hpp"
#include "tessera/engine/layout_json.hpp"

namespace tessera::engine {
namespace {

// The seed's U-Nets (plugin s0-…) predict one logit (classes 1), which UNetOptions::validate
// refuses for the built-in family; seed_unet_layer_sequence checks them instead.
void validate_model(const UNetOptions& model) {
  if (model.name.rfind("s0-", 0) != 0) model.validate();
}

CalibratedCluster resolve_cluster(const SimulateOptions& f) {
  const auto path = calibration_path(f.calibration);
  CalibratedCluster out = load_calibrated_cluster(
      f.cluster, model_calibration(read_calibration(path), path, f.model_preset, f.model), f.model_preset, path);
  parallel::ClusterModel& c = out.cluster;
  if (f.nodes > 0) {
    if (f.nodes > c.nodes) throw Error(fmt::format("--nodes must be in 1..{} ({}), got {}", c.nodes, f.cluster, f.nodes));
    c.nodes = f.nodes;
  }
  return out;
}

// The network's input side: --input-side checked against the model (a seed U-Net takes any
// side: its pooling floors), or --tile's inset (default 512, clamped to the image) grown by
// r + 2ε, as `tessera plan` grows its inset. Refusals name a side that would do.
int64_t input_side(const SimulateOptions& f) {
  const UNetOptions& m = f.model;
  const bool seed = m.name.rfind("s0-", 0) == 0;
  const int64_t a = unet_alignment(m), grow = unet_remainder(m) + 2 * unet_halo(m);
  if (f.input_side > 0) {
    if (seed || unet_output_size(m, f.input_side)) return f.input_side;
    const int64_t below = (f.input_side - grow) / a * a + grow;
    throw Error(fmt::format("--input-side {} is not a valid input for {} (valid sides are S + {}, S a multiple of {}): "
                            "{}{} would do, or give --tile, the inset",
                            f.input_side, f.model_preset, grow, a, below > grow ? fmt::format("{} or ", below) : "",
                            below + a));
  }
  int64_t inset = f.tile;
  if (inset == 0) {
    int64_t largest = 0;
    for (int64_t e : parse_image(f.image)) largest = std::max(largest, e);
    inset = std::min<int64_t>(512, (largest + a - 1) / a * a);
  }
  if (inset % a != 0)
    throw Error(fmt::format("--tile {} is not a multiple of {} ({}'s alignment): {}{} would do", inset, a, f.model_preset,
                            inset / a * a > 0 ? fmt::format("{} or ", inset / a * a) : "", (inset / a + 1) * a));
  return inset + grow;
}

parallel::SimulationOptions options_for(const SimulateOptions& f, int64_t side, const parallel::LayerTimeCalibration& times) {
  LayerSequence seq = parallel::simulated_layer_sequence(f.model, side);
  int64_t tiles = f.images;
  for (int64_t e : parse_image(f.image)) tiles *= (e + seq.output_side - 1) / seq.output_side;
  if (f.tiles > 0) tiles = f.tiles;
  std::vector<double> measured = times.empty() ? std::vector<double>{} : times.seconds(seq);
  return parallel::SimulationOptions(std::move(seq))
      .with_layer_train_seconds(std::move(measured))
      .with_tiles_per_micro_batch(f.batch)
      .with_optimizer_step(f.adam)
      .with_tiles(tiles)
      .with_data_parallel(f.dp)
      .with_pipeline_stages(f.pp)
      .with_spatial(f.sp)
      .with_micro_batches(f.micro_batches)
      .with_schedule(parse_pipeline_schedule(f.schedule))
      .with_balance(parallel::parse_balance_strategy(f.balance))
      .with_checkpoint(parse_activation_checkpoint(f.activation_checkpoint))
      .with_training(!f.infer)
      .with_precision(parse_precision(f.precision))
      .with_per_tile_overhead_seconds(f.per_tile_overhead);
}

void write_gantt(const SimulateOptions& f, const SimulatedPass& pass) {
  std::ofstream out(f.gantt);
  out << parallel::gantt_svg(pass.result.events, fmt::format("{} on {}: one step, dp {} × pp {}, M = {}", f.model_preset,
                                                             pass.cluster.name, f.dp, f.pp, f.micro_batches));
  if (!out) throw Error("cannot write --gantt " + f.gantt);
}

}  // namespace

SimulatedPass simulate_pass(const SimulateOptions& f) {
  validate_model(f.model);
  const CalibratedCluster rc = resolve_cluster(f);
  parallel::SimulationOptions o = options_for(f, input_side(f), rc.times);
  parallel::SimulationResult r = parallel::simulate(o, rc.cluster);
  return {std::move(o), rc.cluster, std::move(r)};
}

void print_simulated_pass(const SimulateOptions& f, const SimulatedPass& pass) {
  const parallel::SimulationResult& r = pass.result;
  const parallel::SimulationOptions& o = pass.options;
  const parallel::ClusterModel& c = pass.cluster;
  const auto& b = r.breakdown;
  const int devices = o.data_parallel * o.pipeline_stages * o.spatial;
  // The nodes the layout occupies (devices packed onto nodes), not all the cluster has.
  const int nodes_used = int((devices + c.devices_per_node - 1) / c.devices_per_node);
  std::cout << fmt::format("simulate {} on {} ({} of its {} nodes × {} {}), {}, {}\n", f.model_preset, c.name,
                           nodes_used, c.nodes, c.devices_per_node, c.device.name,
                           o.training ? "training" : "inference", to_string(o.precision));
  std::cout << fmt::format("  layout        dp {} × pp {} × sp {} = {} devices, M = {}, {}, balance {{{}}}\n",
                           o.data_parallel, o.pipeline_stages, o.spatial, devices, o.micro_batches,
                           to_string(o.schedule), fmt::join(r.balance, ", "));
  std::cout << fmt::format("  tiles         input side {}{}, {} tiles per pass, {} steps\n", o.sequence.input_side,
                           f.input_side > 0 ? " (--input-side)"
                                            : fmt::format(" (inset {} + {})", o.sequence.input_side -
                                                                                  unet_remainder(f.model) - 2 * unet_halo(f.model),
                                                          unet_remainder(f.model) + 2 * unet_halo(f.model)),
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

// Speed-up = tiles/s with K stages ÷ tiles/s with one, M = 2K micro-batches (2 per
// partition), GPipe, stages balanced by time, activation checkpointing `always` (GPipe's
// checkpoint="always", as LAMP ran it) unless --activation-checkpoint says otherwise: with
// torchgpipe's default except_last, 1 … 4 stages at 1434² keep a whole micro-batch beside the
// recomputed one and exceed a V100's 16 GB, which the seed's runs did not.
void print_seed_tables(const SimulateOptions& f) {
  validate_model(f.model);
  if (f.model_preset.rfind("s0-", 0) != 0)
    throw Error("--seed-tables runs the seed's tiles (1434², 192, 512, 1024), valid inputs of the seed's U-Nets only: "
                "give --model s0-small (or s0-medium, s0-large), not " + f.model_preset);
  const CalibratedCluster rc = resolve_cluster(f);
  parallel::ClusterModel c = rc.cluster;
  c.nodes = 1;
  const int k_max = std::min(6, c.devices_per_node);
  auto throughput = [&](int64_t side, int k) {
    SimulateOptions g = f;
    g.dp = 1;
    g.sp = 1;
    g.pp = k;
    g.micro_batches = 2 * k;
    g.schedule = "gpipe";
    if (f.activation_checkpoint == "never") g.activation_checkpoint = "always";
    const parallel::SimulationOptions o = options_for(g, side, rc.times);
    const parallel::SimulationResult r = parallel::simulate(o, c);
    return std::pair{g.micro_batches / r.step_seconds, r.fits_memory};
  };
  std::cout << fmt::format(
      "pipeline speed-up on one {} node ({} × {}), {} training, M = 2 per stage, GPipe, checkpoint {}:\n", c.name,
      c.devices_per_node, c.device.name, f.model_preset,
      f.activation_checkpoint == "never" ? "always" : f.activation_checkpoint);
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

void run_simulate(const SimulateOptions& f) {
  f.validate();
  if (f.seed_tables) return print_seed_tables(f);
  const SimulatedPass pass = simulate_pass(f);
  if (f.json) std::cout << simulation_json(pass.result, pass.options).dump(2) << "\n";
  else print_simulated_pass(f, pass);
  if (!f.gantt.empty()) write_gantt(f, pass);
}

}  // namespace tessera::engine
