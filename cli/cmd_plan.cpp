// tessera plan --model PRESET --image W×H[×D] --devices N --device-memory GiB [--train|--infer]
//              [--json] [--calibration FILE] [--throughput GFLOPS]
// The layout for a model, an image and a set of devices: tile inset and tiling, pipeline
// stages with their balance or spatial parallelism (a tile split over sp ranks, `same`
// padding), micro-batches, data-parallel degree, predicted memory and time, and which limit
// binds. --tile fixes the inset (context the task needs). The search and its models live in
// parallel/planner.hpp.
//
// tessera plan --calibrate --model PRESET: times forward + backward of the network on this
// machine (LibTorch, one tile) and stores the sustained FLOP/s per model in the calibration
// file (cli/calibration.hpp), which later plans use for their times; then measures every
// layer's memory beyond the stage model at two tile insets (half the calibration tile and the
// whole) and stores the per-layer fit (planner.hpp LayerMemoryCalibration), which later plans
// and `tessera bench pipeline` add to their stage memory.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tessera/engine/calibration.hpp"
#include "tessera/engine/layout_json.hpp"
#include "commands.hpp"
#include "model_options.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/parallel/modes/memory_calibration.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"
#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::cli {

using namespace ::tessera::engine;  // the engine library (engine/): transitional, until the command is thin
namespace {

namespace fs = std::filesystem;

struct Flags {
  ModelFlags model;
  std::string image;
  int devices = 1;
  double device_memory_gib = 16;
  bool train = false, infer = false, json = false, calibrate = false;
  std::string schedule = "1f1b", checkpoint = "auto";
  std::optional<double> throughput_gflops;
  std::string calibration;
  std::string simulate;  // a cluster description: the chosen layout simulated on it
  std::optional<int64_t> calibration_tile;  // default 128 (2-D), 32 (3-D)
  std::optional<int64_t> tile;              // the inset every step must see whole
  bool no_spatial = false;
  int threads = 2;
};

int64_t aligned_inset(const UNetOptions& o, int64_t tile) {
  const int64_t a = unet_alignment(o);
  return std::max<int64_t>(a, (tile + a - 1) / a * a);
}

int64_t input_side_for_inset(const UNetOptions& o, int64_t inset) {
  return inset + unet_remainder(o) + 2 * unet_halo(o);
}

// Median seconds of forward + backward of one tile; FLOP/s = 3 × forward FLOPs / seconds.
nlohmann::json calibrate_time(UNetImpl& net, const LayerSequence& seq) {
  const UNetOptions& o = seq.options;
  std::vector<int64_t> shape{1, o.in_channels};
  for (int d = 0; d < o.dims; ++d) shape.push_back(seq.input_side);
  const auto x = torch::randn(shape);
  std::vector<double> seconds;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    net.zero_grad();
    net.forward(x).square().mean().backward();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    if (i > 0) seconds.push_back(dt.count());  // the first run warms up allocators
  }
  std::sort(seconds.begin(), seconds.end());
  const double s = seconds[seconds.size() / 2];
  return {{"device_flops", 3.0 * seq.flops() / s}, {"input_side", seq.input_side}, {"seconds_per_step", s}};
}

void calibrate(const Flags& f) {
  const UNetOptions o = f.model.resolve();
  torch::set_num_threads(f.threads);
  const int64_t inset = aligned_inset(o, f.calibration_tile.value_or(o.dims == 3 ? 32 : 128));
  const int64_t half = aligned_inset(o, inset / 2);
  if (half == inset)
    throw Error("--calibration-tile: " + std::to_string(inset) + " is the smallest inset (" +
                std::to_string(unet_alignment(o)) + "); the memory fit needs two, give at least twice that");
  const LayerSequence seq = unet_layer_sequence(o, input_side_for_inset(o, inset));
  const LayerSequence small = unet_layer_sequence(o, input_side_for_inset(o, half));
  torch::manual_seed(0);
  UNet net(o);
  nlohmann::json entry = calibrate_time(*net, seq);
  const double flops = entry["device_flops"].get<double>(), s = entry["seconds_per_step"].get<double>();
  std::printf("%s: forward + backward of a %lld-px tile in %.3f s = %.1f GFLOP/s\n", f.model.preset.c_str(),
              (long long)seq.input_side, s, flops / 1e9);

  // Times first: measuring memory fixes glibc's mmap threshold, which slows allocation.
  ProgressBar bar("measuring layers", 3 * seq.size(), "layers");
  const auto seconds = parallel::measure_layer_seconds(*net, seq, [&](int done, int) { bar.update(done); });
  const auto extra_small =
      parallel::measure_layer_extra_bytes(*net, small, [&](int done, int) { bar.update(seq.size() + done); });
  const auto extra =
      parallel::measure_layer_extra_bytes(*net, seq, [&](int done, int) { bar.update(2 * seq.size() + done); });
  bar.finish();
  const auto fit = parallel::LayerMemoryCalibration::fit(small, extra_small, seq, extra);
  const auto times = parallel::LayerTimeCalibration::fit(seq, seconds);
  int64_t largest = 0;
  int where = 0;
  for (int i = 0; i < seq.size(); ++i)
    if (extra[size_t(i)] > largest) largest = extra[size_t(where = i)];
  std::printf("%s: layer memory beyond the stage model at input sides %lld and %lld; largest extra %.2f MiB (%s at %lld)\n",
              f.model.preset.c_str(), (long long)small.input_side, (long long)seq.input_side,
              double(largest) / double(1 << 20), seq.layers[size_t(where)].name.c_str(), (long long)seq.input_side);

  entry["threads"] = f.threads;
  entry["dims"] = o.dims;
  entry["model"] = o;
  entry["memory"] = {{"sides", {small.input_side, seq.input_side}},
                     {"threads", f.threads},
                     {"measured_extra_bytes", {extra_small, extra}},
                     {"constant_bytes", fit.constant_bytes},
                     {"bytes_per_element", fit.bytes_per_element}};
  entry["time"] = {{"side", seq.input_side}, {"seconds", seconds}, {"seconds_per_unit", times.seconds_per_unit}};
  const fs::path path = calibration_path(f.calibration);
  nlohmann::json j = read_calibration(path);
  j["models"][f.model.preset] = entry;
  write_calibration(path, j);
  std::printf("stored in %s\n", path.string().c_str());
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

std::string axes(const Index& v) {
  std::string s;
  for (auto it = v.rbegin(); it != v.rend(); ++it) s += (s.empty() ? "" : " × ") + std::to_string(*it);
  return s;
}

// `--simulate CLUSTER`: the chosen layout (tile, dp × pp × sp, M, schedule) run through the
// discrete-event simulator on that cluster (measured layer times when its device is
// "calibrated" and the calibration has them), beside the planner's closed-form estimate.
nlohmann::json simulate_layout(const Flags& f, const UNetOptions& o, const parallel::Layout& L, bool training,
                               const ModelCalibration& cal, const fs::path& cal_path) {
  CalibratedCluster cc = load_calibrated_cluster(f.simulate, cal, f.model.preset, cal_path);
  const parallel::ClusterModel& c = cc.cluster;
  LayerSequence seq = parallel::simulated_layer_sequence(o, L.tile_input_side);
  std::vector<double> measured = cc.times.empty() ? std::vector<double>{} : cc.times.seconds(seq);
  const auto so = parallel::SimulationOptions(std::move(seq))
                      .with_tiles(L.tiles)
                      .with_data_parallel(L.data_parallel)
                      .with_pipeline_stages(L.stages)
                      .with_spatial(L.spatial)
                      .with_micro_batches(L.micro_batches)
                      .with_schedule(L.schedule)
                      .with_training(training)
                      .with_layer_train_seconds(std::move(measured));
  parallel::SimulationResult r;
  try {
    r = parallel::simulate(so, c);
  } catch (const Error& e) {  // e.g. a layout with more devices than the cluster has
    throw Error("--simulate " + f.simulate + ": " + e.what());
  }
  nlohmann::json j = simulation_json(r, so);
  j["cluster"] = c.name;
  j["file"] = f.simulate;
  j["activation_checkpoint_modelled"] = L.checkpoint == ActivationCheckpoint::kNever;
  return j;
}

// The planner's options from the flags and the calibration file, and where its times and
// memory come from (said beside them).
struct Planned {
  parallel::PlanOptions options;
  fs::path calibration_path;
  ModelCalibration calibration;
  std::string time_source = "default CPU figure", memory_source;
};

Planned plan_options(const Flags& f, const UNetOptions& o) {
  if (f.image.empty()) throw Error("plan: --image is required (W×H or W×H×D)");
  if (f.train && f.infer) throw Error("plan: give one of --train, --infer");
  if (f.device_memory_gib <= 0) throw Error("plan: --device-memory must be > 0 GiB");
  Planned p{parallel::PlanOptions(o, parse_image(f.image), f.devices, int64_t(f.device_memory_gib * double(int64_t{1} << 30))),
            calibration_path(f.calibration), {}};
  parallel::PlanOptions& po = p.options;
  po.with_training(!f.infer).with_schedule(parse_pipeline_schedule(f.schedule));
  if (f.checkpoint != "auto") po.with_checkpoint(parse_activation_checkpoint(f.checkpoint));
  if (f.tile) po.with_tile_inset(*f.tile);
  po.with_consider_spatial(!f.no_spatial);
  if (!o.is_builtin()) {
    // A registry model presents no layer sequence: no stages to cut, no convolutions to split.
    po.max_stages = 1;
    po.with_consider_spatial(false);
    std::fprintf(stderr, "plan: %s is a registry model: costs modelled on the U-Net of the same shape; "
                 "pipeline stages and spatial blocks are not offered (data parallel only)\n", o.name.c_str());
  }
  if (f.throughput_gflops) {
    po.with_device_flops(*f.throughput_gflops * 1e9);
    p.time_source = "--throughput";
  }
  const fs::path& path = p.calibration_path;
  const ModelCalibration& cal = p.calibration = model_calibration(read_calibration(path), path, f.model.preset, o);
  if (!cal.other_options.empty() && f.calibration.empty())
    std::fprintf(stderr, "plan: not calibrated: %s\n", cal.other_options.c_str());
  if (!f.calibration.empty() && !cal.device_flops && cal.memory.empty() && cal.time.empty())
    throw Error(!cal.other_options.empty()
                    ? cal.other_options
                    : path.string() + ": no calibration for model '" + f.model.preset + "' (run tessera plan --calibrate)");
  if (cal.device_flops && !f.throughput_gflops) {
    po.with_device_flops(*cal.device_flops);
    p.time_source = "calibrated, " + path.string();
  }
  if (!cal.time.empty() && !f.throughput_gflops && !f.infer) p.time_source = "measured layer times, " + path.string();
  p.memory_source = cal.memory.empty() ? "stage model" : "stage model + calibrated layer extras, " + path.string();
  po.with_memory_calibration(cal.memory);
  if (!f.throughput_gflops) po.with_time_calibration(cal.time);
  return p;
}

constexpr double kGiB = double(int64_t{1} << 30);

nlohmann::json layout_json(const Flags& f, const Planned& p, const parallel::Layout& L) {
  const parallel::PlanOptions& po = p.options;
  std::vector<double> stage_gib;
  for (auto b : L.stage_memory_bytes) stage_gib.push_back(double(b) / kGiB);
  return {{"model", f.model.preset},
          {"image", Index(po.image.rbegin(), po.image.rend())},
          {"training", po.training},
          {"devices", po.devices},
          {"device_memory_bytes", po.device_memory_bytes},
          {"tile",
           {{"inset", L.tile_inset},
            {"alignment", L.alignment},
            {"input_side", L.tile_input_side},
            {"output_side", L.tile_output_side},
            {"tiles_per_axis", Index(L.tiles_per_axis.rbegin(), L.tiles_per_axis.rend())},
            {"tiles", L.tiles},
            {"halo_overhead", L.halo_overhead}}},
          {"pipeline",
           {{"stages", L.stages},
            {"balance", L.balance},
            {"strategy", "memory"},
            {"stage_first_layer", L.stage_first_layer},
            {"micro_batches", L.micro_batches},
            {"schedule", to_string(L.schedule)},
            {"activation_checkpoint", to_string(L.checkpoint)},
            {"bubble_fraction", L.bubble_fraction}}},
          {"spatial",
           {{"ranks", L.spatial},
            {"mesh", Index(L.spatial_mesh.rbegin(), L.spatial_mesh.rend())},
            {"halo_bytes_per_step", L.halo_bytes_per_step},
            {"halo_seconds", L.halo_seconds}}},
          {"data_parallel", L.data_parallel},
          {"devices_used", L.devices_used},
          {"memory",
           {{"stage_bytes", L.stage_memory_bytes},
            {"stage_gib", stage_gib},
            {"peak_bytes", L.peak_memory_bytes},
            {"peak_gib", double(L.peak_memory_bytes) / kGiB},
            {"source", p.memory_source}}},
          {"time",
           {{"stage_seconds", L.stage_seconds},
            {"step_seconds", L.step_seconds},
            {"steps_per_pass", L.steps},
            {"pass_seconds", L.pass_seconds},
            {"device_flops", L.device_flops},
            {"source", p.time_source}}},
          {"reasons", L.reasons}};
}

void print_simulation(const nlohmann::json& sim, const std::string& file) {
  const auto& b = sim["breakdown"];
  std::printf("simulated on %s (%s): step %.3g s, pass %.3g s = compute %.3g + bubble %.3g + halo %.3g + allreduce "
              "%.3g + io %.3g%s\n",
              sim["cluster"].get<std::string>().c_str(), file.c_str(), sim["step_seconds"].get<double>(),
              sim["pass_seconds"].get<double>(), b["compute"].get<double>(), b["bubble"].get<double>(),
              b["halo"].get<double>(), b["allreduce"].get<double>(), b["io"].get<double>(),
              sim["activation_checkpoint_modelled"].get<bool>() ? "" : " (activation checkpointing not simulated)");
}

void print_layout(const Flags& f, const Planned& p, const parallel::Layout& L) {
  const parallel::PlanOptions& po = p.options;
  std::printf("plan for %s on %s, %d devices × %.3g GiB, %s\n", f.model.preset.c_str(), axes(po.image).c_str(), po.devices,
              f.device_memory_gib, po.training ? "training" : "inference");
  std::printf("  tile inset T            %lld (multiple of %lld), input %lld, output %lld\n", (long long)L.tile_inset,
              (long long)L.alignment, (long long)L.tile_input_side, (long long)L.tile_output_side);
  std::printf("  tiling                  %s = %lld tiles, halo overhead E %.2f\n", axes(L.tiles_per_axis).c_str(),
              (long long)L.tiles, L.halo_overhead);
  std::printf("  pipeline stages K       %d, balance {%s} (memory-aware)\n", L.stages, join(L.balance).c_str());
  std::printf("  micro-batches M         %d (%s), bubble %.2f, activation checkpointing %s\n", L.micro_batches,
              to_string(L.schedule).c_str(), L.bubble_fraction, to_string(L.checkpoint).c_str());
  if (L.spatial > 1)
    std::printf("  spatial parallel sp     %d (%s blocks), halo %.3g MiB per step, %.3g s\n", L.spatial,
                axes(Index(L.spatial_mesh.begin(), L.spatial_mesh.end())).c_str(),
                double(L.halo_bytes_per_step) / double(1 << 20), L.halo_seconds);
  std::printf("  data parallel dp        %d  (devices used %d of %d)\n", L.data_parallel, L.devices_used, po.devices);
  std::printf("  peak memory per device  %.2f GiB (%s)\n", double(L.peak_memory_bytes) / kGiB, p.memory_source.c_str());
  std::printf("  step / pass             %.3g s / %.3g s (%lld steps, %.3g GFLOP/s per device: %s)\n", L.step_seconds,
              L.pass_seconds, (long long)L.steps, L.device_flops / 1e9, p.time_source.c_str());
  std::printf("  stage  first layer        layers  memory GiB  seconds\n");
  for (int s = 0; s < L.stages; ++s)
    std::printf("  %5d  %-18s %6d  %10.3f  %7.3g\n", s, L.stage_first_layer[s].c_str(), L.balance[s],
                double(L.stage_memory_bytes[s]) / kGiB, L.stage_seconds[s]);
}

void run_plan(const Flags& f) {
  const UNetOptions o = f.model.resolve();
  const Planned p = plan_options(f, o);
  const parallel::Layout L = parallel::plan(p.options);
  const nlohmann::json sim =
      f.simulate.empty() ? nlohmann::json() : simulate_layout(f, o, L, p.options.training, p.calibration, p.calibration_path);
  if (f.json) {
    nlohmann::json j = layout_json(f, p, L);
    if (!sim.is_null()) j["simulation"] = sim;
    std::cout << j.dump(2) << '\n';
    return;
  }
  print_layout(f, p, L);
  if (!sim.is_null()) print_simulation(sim, f.simulate);
  std::printf("why:\n");
  for (const auto& r : L.reasons) std::printf("  - %s\n", r.c_str());
}

}  // namespace

void register_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Choose tiling, pipeline stages, micro-batches and data parallelism for a "
                                         "model, an image and a set of devices");
  static Flags f;
  f.model.add_to(cmd);
  cmd->add_option("--image", f.image, "Image extent W×H or W×H×D (pixels/voxels)");
  cmd->add_option("--devices", f.devices, "Number of devices (ranks)")->capture_default_str();
  cmd->add_option("--device-memory", f.device_memory_gib, "Memory per device in GiB")->capture_default_str();
  cmd->add_flag("--train", f.train, "Plan training (default)");
  cmd->add_flag("--infer", f.infer, "Plan inference");
  cmd->add_option("--tile", f.tile, "Tile inset every step must see whole (default: the planner chooses)");
  cmd->add_flag("--no-spatial", f.no_spatial, "Do not consider spatial parallelism (sp)");
  cmd->add_flag("--json", f.json, "Print the layout as JSON");
  cmd->add_option("--schedule", f.schedule, "Pipeline schedule: 1f1b or gpipe")->capture_default_str();
  cmd->add_option("--activation-checkpoint", f.checkpoint, "Activation checkpointing: auto (the planner chooses), never, always, except_last")
      ->capture_default_str();
  cmd->add_option("--throughput", f.throughput_gflops, "Sustained GFLOP/s per device (overrides calibration)");
  cmd->add_option("--calibration", f.calibration, "Calibration file (default ~/.cache/tessera/calibration.json)");
  cmd->add_option("--simulate", f.simulate,
                  "Also simulate the chosen layout on this cluster description (clusters/*.yaml) and print it beside the plan");
  cmd->add_flag("--calibrate", f.calibrate, "Measure this machine's forward + backward speed and per-layer memory for --model and store them");
  cmd->add_option("--calibration-tile", f.calibration_tile, "Inset of the tile --calibrate measures (default 128, 3-D 32)");
  cmd->add_option("--threads", f.threads, "Intra-op threads for --calibrate")->capture_default_str();
  cmd->callback([] { f.calibrate ? calibrate(f) : run_plan(f); });
}

}  // namespace tessera::cli
