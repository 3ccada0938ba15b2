#include "tessera/engine/plan_job.hpp"

#include <cstdio>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "tessera/core/error.hpp"
#include "tessera/core/tile_choice.hpp"
#include "tessera/engine/calibration.hpp"
#include "tessera/engine/dataset_plan.hpp"
#include "tessera/engine/layout_json.hpp"
#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::engine {
namespace {

namespace fs = std::filesystem;

// The planner's options from the flags alone (no calibration yet).
parallel::PlanOptions planner_options(const PlanJobOptions& o) {
  parallel::PlanOptions po(o.model, parse_image(o.image), o.devices,
                           int64_t(o.device_memory * double(int64_t{1} << 30)));
  po.with_training(!o.infer).with_schedule(parse_pipeline_schedule(o.schedule));
  if (o.activation_checkpoint != "auto") po.with_checkpoint(parse_activation_checkpoint(o.activation_checkpoint));
  if (o.tile > 0) po.with_tile_inset(o.tile);
  po.with_consider_spatial(o.spatial);
  if (!o.model.is_builtin()) {
    // A registry model presents no layer sequence: no stages to cut, no convolutions to split.
    po.max_stages = 1;
    po.with_consider_spatial(false);
    std::fprintf(stderr, "plan: %s is a registry model: costs modelled on the U-Net of the same shape; "
                 "pipeline stages and spatial blocks are not offered (data parallel only)\n", o.model.name.c_str());
  }
  return po;
}

// The calibration file's figures for this model, and where times and memory come from.
ModelCalibration apply_calibration(const PlanJobOptions& o, const fs::path& path, PlanResult& r) {
  parallel::PlanOptions& po = r.options;
  if (o.throughput > 0) {
    po.with_device_flops(o.throughput * 1e9);
    r.time_source = "--throughput";
  }
  const ModelCalibration cal = model_calibration(read_calibration(path), path, o.model_preset, o.model);
  if (!cal.other_options.empty() && o.calibration.empty())
    std::fprintf(stderr, "plan: not calibrated: %s\n", cal.other_options.c_str());
  if (!o.calibration.empty() && !cal.device_flops && cal.memory.empty() && cal.time.empty())
    throw Error(!cal.other_options.empty()
                    ? cal.other_options
                    : path.string() + ": no calibration for model '" + o.model_preset + "' (run tessera plan --calibrate)");
  if (cal.device_flops && o.throughput == 0) {
    po.with_device_flops(*cal.device_flops);
    r.time_source = "calibrated, " + path.string();
  }
  if (!cal.time.empty() && o.throughput == 0 && !o.infer) r.time_source = "measured layer times, " + path.string();
  r.memory_source = cal.memory.empty() ? "stage model" : "stage model + calibrated layer extras, " + path.string();
  po.with_memory_calibration(cal.memory);
  if (o.throughput == 0) po.with_time_calibration(cal.time);
  return cal;
}

// `--cluster FILE`: the devices and network of a described cluster instead of --device-memory
// and the CPU figure or this machine's calibration (which describe another machine; a
// "calibrated" device is this machine and keeps them). One sustained rate: FP32 peak × e_max,
// the efficiency the simulator's curve tends to on large maps.
void apply_cluster(const PlanJobOptions& o, const ModelCalibration& cal, const fs::path& cal_path, PlanResult& r) {
  const CalibratedCluster cc = load_calibrated_cluster(o.cluster, cal, o.model_preset, cal_path);
  const parallel::ClusterModel& c = cc.cluster;
  const parallel::DeviceModel& d = c.device;
  r.cluster = c;
  parallel::PlanOptions& po = r.options;
  po.device_memory_bytes = d.memory_bytes;
  po.with_baseline_bytes(d.baseline_bytes).with_memory_bytes_per_second(d.memory_bytes_per_second);
  const bool one_node = po.devices <= c.devices_per_node;
  po.with_allreduce_bytes_per_second(one_node ? c.intra_node_bytes_per_second : c.inter_node_bytes_per_second)
      .with_message_latency_seconds(one_node ? c.intra_node_latency_seconds : c.inter_node_latency_seconds);
  if (o.throughput > 0) {
    r.machine = fmt::format("{}: {}, {:.3g} GiB, network {:.3g} GB/s; speed from --throughput", o.cluster, d.name,
                            double(d.memory_bytes) / double(1 << 30),
                            (one_node ? c.intra_node_bytes_per_second : c.inter_node_bytes_per_second) / 1e9);
    return;
  }
  po.with_device_flops(d.fp32_flops * d.efficiency.max).with_time_calibration(cc.times);
  r.time_source = fmt::format("{} {}: FP32 peak {:.3g} TFLOP/s × e_max {:.2g}", o.cluster, d.name, d.fp32_flops / 1e12,
                              d.efficiency.max);
  r.machine = fmt::format("{}: {} × {} per node, {:.3g} GiB each, {:.3g} GFLOP/s sustained, network {:.3g} GB/s ({})",
                          o.cluster, c.devices_per_node, d.name, double(d.memory_bytes) / double(1 << 30),
                          po.device_flops / 1e9,
                          (one_node ? c.intra_node_bytes_per_second : c.inter_node_bytes_per_second) / 1e9,
                          one_node ? "inside a node" : "between nodes");
}

// `--simulate CLUSTER`: the chosen layout (tile, dp × pp × sp, M, schedule) run through the
// discrete-event simulator on that cluster (measured layer times when its device is
// "calibrated" and the calibration has them), beside the planner's closed-form estimate.
nlohmann::json simulate_layout(const PlanJobOptions& o, const PlanResult& r, const ModelCalibration& cal,
                               const fs::path& cal_path) {
  const parallel::Layout& L = r.layout;
  CalibratedCluster cc = load_calibrated_cluster(o.simulate, cal, o.model_preset, cal_path);
  const parallel::ClusterModel& c = cc.cluster;
  LayerSequence seq = parallel::simulated_layer_sequence(o.model, L.tile_input_side);
  std::vector<double> measured = cc.times.empty() ? std::vector<double>{} : cc.times.seconds(seq);
  const auto so = parallel::SimulationOptions(std::move(seq))
                      .with_tiles(L.tiles)
                      .with_data_parallel(L.data_parallel)
                      .with_pipeline_stages(L.stages)
                      .with_spatial(L.spatial)
                      .with_micro_batches(L.micro_batches)
                      .with_schedule(L.schedule)
                      .with_training(r.options.training)
                      .with_layer_train_seconds(std::move(measured));
  parallel::SimulationResult sim;
  try {
    sim = parallel::simulate(so, c);
  } catch (const Error& e) {  // e.g. a layout with more devices than the cluster has
    throw Error("--simulate " + o.simulate + ": " + e.what());
  }
  nlohmann::json j = simulation_json(sim, so);
  j["cluster"] = c.name;
  j["file"] = o.simulate;
  j["activation_checkpoint_modelled"] = L.checkpoint == ActivationCheckpoint::kNever;
  return j;
}

}  // namespace

PlanResult plan_layout(const PlanJobOptions& o) {
  PlanResult r{planner_options(o), {}, "default CPU figure", "", "", std::nullopt, nullptr, std::nullopt};
  const fs::path path = calibration_path(o.calibration);
  const ModelCalibration cal = apply_calibration(o, path, r);
  if (!o.cluster.empty()) apply_cluster(o, cal, path, r);
  if (!o.infer) {
    try {
      r.grid = parallel::plan_grid(r.options, o.domains);
    } catch (const Error&) {
      if (o.domains > 1) throw;  // one domain: the layout below is the plan, and says what fits or why not
    }
  }
  // With domains, the layout of one domain's image on its own devices (the grid's DSN terms aside).
  parallel::PlanOptions per_domain = r.options;
  per_domain.devices = o.devices / o.domains;
  r.layout = parallel::plan(per_domain);
  if (!o.simulate.empty()) r.simulation = simulate_layout(o, r, cal, path);
  return r;
}

void plan_dataset(const PlanJobOptions& o) {
  const DatasetFingerprint f = fingerprint_dataset(o.dataset);
  const TrainingPlan p = plan_training(f, plan_resources(o.devices, o.device_memory));
  if (o.json)
    std::cout << plan_json(f, p).dump(2) << '\n';
  else
    std::cout << describe_plan(f, p);
}

void run_plan(const PlanJobOptions& o) {
  o.validate();
  if (o.calibrate) return calibrate_model(o);
  if (!o.dataset.empty()) return plan_dataset(o);
  const PlanResult r = plan_layout(o);
  if (o.json) {
    std::cout << plan_json(o, r).dump(2) << '\n';
    return;
  }
  print_plan(o, r);
}

}  // namespace tessera::engine
