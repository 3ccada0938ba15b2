// What `tessera plan` prints: the layout as text or JSON, the simulation beside it.
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/stream_executor.hpp"
#include "tessera/core/tile_choice.hpp"
#include "tessera/engine/plan_job.hpp"
#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::engine {
namespace {

constexpr double kGiB = double(int64_t{1} << 30);

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

// Extents in W × H (× D) order, as the user gave --image.
std::string axes(const Index& v) {
  std::string s;
  for (auto it = v.rbegin(); it != v.rend(); ++it) s += (s.empty() ? "" : " × ") + std::to_string(*it);
  return s;
}

nlohmann::json tile_json(const parallel::Layout& L) {
  return {{"inset", L.tile_inset},
          {"alignment", L.alignment},
          {"input_side", L.tile_input_side},
          {"output_side", L.tile_output_side},
          {"tiles_per_axis", Index(L.tiles_per_axis.rbegin(), L.tiles_per_axis.rend())},
          {"tiles", L.tiles},
          {"halo_overhead", L.halo_overhead}};
}

nlohmann::json pipeline_json(const parallel::Layout& L) {
  return {{"stages", L.stages},
          {"balance", L.balance},
          {"strategy", "memory"},
          {"stage_first_layer", L.stage_first_layer},
          {"micro_batches", L.micro_batches},
          {"schedule", to_string(L.schedule)},
          {"activation_checkpoint", to_string(L.checkpoint)},
          {"bubble_fraction", L.bubble_fraction}};
}

nlohmann::json memory_json(const PlanResult& r) {
  const parallel::Layout& L = r.layout;
  std::vector<double> stage_gib;
  for (auto b : L.stage_memory_bytes) stage_gib.push_back(double(b) / kGiB);
  return {{"stage_bytes", L.stage_memory_bytes},
          {"stage_gib", stage_gib},
          {"peak_bytes", L.peak_memory_bytes},
          {"peak_gib", double(L.peak_memory_bytes) / kGiB},
          {"source", r.memory_source}};
}

nlohmann::json time_json(const PlanResult& r) {
  const parallel::Layout& L = r.layout;
  return {{"stage_seconds", L.stage_seconds},
          {"step_seconds", L.step_seconds},
          {"steps_per_pass", L.steps},
          {"pass_seconds", L.pass_seconds},
          {"device_flops", L.device_flops},
          {"source", r.time_source}};
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

// Why the planner's step and the simulator's differ: what each one prices.
void explain_simulation(const PlanJobOptions& o, const PlanResult& r) {
  const double planned = r.layout.step_seconds, simulated = r.simulation["step_seconds"].get<double>();
  std::printf("plan against simulation: step %.3g s planned, %.3g s simulated (%.2f×)", planned, simulated,
              simulated / planned);
  if (o.cluster.empty()) {
    std::printf(": the plan is priced at %s, the simulation at %s's devices; --cluster %s prices the plan there too\n",
                r.time_source.c_str(), o.simulate.c_str(), o.simulate.c_str());
  } else if (o.cluster != o.simulate) {
    std::printf(": the plan is priced on %s, the simulation runs on %s\n", o.cluster.c_str(), o.simulate.c_str());
  } else {
    const parallel::DeviceModel& d = r.cluster->device;
    std::printf(": the plan prices every convolution at the sustained rate e_max %.2g; the simulation at what each "
                "layer reaches (measured convolution kernels, memory-bound layers at the memory bandwidth, %.3g µs "
                "per layer launch): %.2g FLOP-weighted at input %lld; plus the input read\n",
                d.efficiency.max, d.launch_seconds * 1e6,
                layer_efficiency(r.layout, o.model, *r.cluster, r.options.training),
                (long long)r.layout.tile_input_side);
  }
}

// Inference of a model that streams: strips within the device memory against the tiles above.
nlohmann::json stream_json(const PlanResult& r) {
  const parallel::PlanOptions& po = r.options;
  if (po.training || stream_refusal(po.model)) return nullptr;
  const StripChoice s = choose_strip(po.model, po.image, po.device_memory_bytes, 0, 1);  // one thread a device
  return {{"strip", s.strip},
          {"predicted_bytes", s.predicted_bytes},
          {"carried_bytes", s.carried_bytes},
          {"recompute", 1.0},
          {"tile_recompute", tile_recompute(po.model, po.image, r.layout.tile_inset)}};
}

void print_stream(const PlanResult& r) {
  const nlohmann::json s = stream_json(r);
  if (s.is_null()) return;
  std::printf("  streaming (--mode stream) strips of %lld rows: peak %.3g GiB predicted (carried rows %s), recompute "
              "1.00x; the tiles above: %.3g GiB, recompute %.2fx\n",
              s["strip"].get<long long>(), double(s["predicted_bytes"].get<int64_t>()) / kGiB,
              format_bytes(s["carried_bytes"].get<int64_t>()).c_str(), double(r.layout.peak_memory_bytes) / kGiB,
              s["tile_recompute"].get<double>());
}

void print_layout(const PlanJobOptions& o, const PlanResult& r) {
  const parallel::PlanOptions& po = r.options;
  const parallel::Layout& L = r.layout;
  std::printf("plan for %s on %s, %d devices × %.3g GiB, %s%s\n", o.model_preset.c_str(), axes(po.image).c_str(),
              po.devices, double(po.device_memory_bytes) / kGiB, po.training ? "training" : "inference",
              o.domains > 1 ? fmt::format(" (one of {} domains: {} devices each)", o.domains, o.devices / o.domains).c_str() : "");
  if (!r.machine.empty()) std::printf("  machine                 %s\n", r.machine.c_str());
  std::printf("  tile inset T            %lld (multiple of %lld), input %lld, output %lld\n", (long long)L.tile_inset,
              (long long)L.alignment, (long long)L.tile_input_side, (long long)L.tile_output_side);
  std::printf("  tiling                  %s = %lld tiles, halo overhead E %.2f\n", axes(L.tiles_per_axis).c_str(),
              (long long)L.tiles, L.halo_overhead);
  print_stream(r);
  std::printf("  pipeline stages K       %d, balance {%s} (memory-aware)\n", L.stages, join(L.balance).c_str());
  std::printf("  micro-batches M         %d (%s), bubble %.2f, activation checkpointing %s\n", L.micro_batches,
              to_string(L.schedule).c_str(), L.bubble_fraction, to_string(L.checkpoint).c_str());
  if (L.spatial > 1)
    std::printf("  spatial parallel sp     %d (%s blocks), halo %.3g MiB per step, %.3g s\n", L.spatial,
                axes(Index(L.spatial_mesh.begin(), L.spatial_mesh.end())).c_str(),
                double(L.halo_bytes_per_step) / double(1 << 20), L.halo_seconds);
  std::printf("  data parallel dp        %d  (devices used %d of %d)\n", L.data_parallel, L.devices_used, po.devices);
  std::printf("  peak memory per device  %.2f GiB (%s)\n", double(L.peak_memory_bytes) / kGiB, r.memory_source.c_str());
  std::printf("  step / pass             %.3g s / %.3g s (%lld steps, %.3g GFLOP/s per device: %s)\n", L.step_seconds,
              L.pass_seconds, (long long)L.steps, L.device_flops / 1e9, r.time_source.c_str());
  std::printf("  stage  first layer        layers  memory GiB  seconds\n");
  for (int s = 0; s < L.stages; ++s)
    std::printf("  %5d  %-18s %6d  %10.3f  %7.3g\n", s, L.stage_first_layer[s].c_str(), L.balance[s],
                double(L.stage_memory_bytes[s]) / kGiB, L.stage_seconds[s]);
}

// The process grid's combinations (grid_plan.hpp): one row per (pp, sp), its best layout or the
// least memory it needs, and why it lost.
nlohmann::json grid_json(const parallel::GridPlan& g) {
  nlohmann::json rows = nlohmann::json::array();
  for (const parallel::GridLayout& l : g.layouts)
    rows.push_back({{"domains", l.domains},
                    {"dp", l.data_parallel},
                    {"pp", l.stages},
                    {"sp", l.spatial},
                    {"mesh", Index(l.mesh.rbegin(), l.mesh.rend())},
                    {"micro_batches", l.micro_batches},
                    {"tile_inset", l.tile_inset},
                    {"devices_used", l.devices_used},
                    {"rank_bytes", l.rank_bytes},
                    {"step_seconds", l.step_seconds},
                    {"pass_seconds", l.pass_seconds},
                    {"fits", l.fits},
                    {"verdict", l.verdict}});
  return {{"layouts", rows}, {"chosen", g.chosen}, {"reasons", g.reasons}};
}

void print_grid(const parallel::GridPlan& g, int devices) {
  std::printf("process grid: domains × dp × pp × sp on %d devices (each (pp, sp) at its best inset and M)\n", devices);
  std::printf("  domains    dp  pp  sp  mesh    M  inset  devices  GiB/rank  s/pass  verdict\n");
  for (const parallel::GridLayout& l : g.layouts) {
    std::string mesh;
    for (auto it = l.mesh.rbegin(); it != l.mesh.rend(); ++it) mesh += (mesh.empty() ? "" : "x") + std::to_string(*it);
    std::printf("  %7d %5d %3d %3d  %-5s %3d %6lld %8d %9.2f %7.3g  %s\n", l.domains, l.data_parallel, l.stages,
                l.spatial, mesh.empty() ? "-" : mesh.c_str(), l.micro_batches, (long long)l.tile_inset,
                l.devices_used, double(l.rank_bytes) / kGiB, l.pass_seconds, l.verdict.c_str());
  }
  for (const auto& reason : g.reasons) std::printf("  - %s\n", reason.c_str());
}

}  // namespace

double layer_efficiency(const parallel::Layout& layout, const UNetOptions& model, const parallel::ClusterModel& cluster,
                        bool training) {
  // What the simulator itself prices (parallel/plan/simulator.hpp): each layer's measured
  // convolution efficiency or its bytes at the memory bandwidth, plus its launch.
  const LayerSequence seq = parallel::simulated_layer_sequence(model, layout.tile_input_side);
  const parallel::LayerPassSeconds t = parallel::layer_pass_seconds(seq, cluster.device, Precision::kFp32, 1);
  double flops = 0, seconds = 0;
  for (size_t i = 0; i < seq.layers.size(); ++i) {
    flops += (training ? 3.0 : 1.0) * seq.layers[i].flops;
    seconds += t.forward[i] + (training ? t.backward[i] : 0.0);
  }
  return seconds > 0 ? flops / (seconds * cluster.device.peak_flops(Precision::kFp32)) : cluster.device.efficiency.max;
}

nlohmann::json plan_json(const PlanJobOptions& o, const PlanResult& r) {
  const parallel::PlanOptions& po = r.options;
  const parallel::Layout& L = r.layout;
  nlohmann::json j{{"model", o.model_preset},
                   {"image", Index(po.image.rbegin(), po.image.rend())},
                   {"training", po.training},
                   {"devices", po.devices},
                   {"device_memory_bytes", po.device_memory_bytes},
                   {"tile", tile_json(L)},
                   {"pipeline", pipeline_json(L)},
                   {"spatial",
                    {{"ranks", L.spatial},
                     {"mesh", Index(L.spatial_mesh.rbegin(), L.spatial_mesh.rend())},
                     {"halo_bytes_per_step", L.halo_bytes_per_step},
                     {"halo_seconds", L.halo_seconds}}},
                   {"data_parallel", L.data_parallel},
                   {"devices_used", L.devices_used},
                   {"memory", memory_json(r)},
                   {"time", time_json(r)},
                   {"reasons", L.reasons}};
  if (!r.simulation.is_null()) j["simulation"] = r.simulation;
  if (!r.machine.empty()) j["machine"] = r.machine;
  if (r.cluster) j["layer_efficiency"] = layer_efficiency(L, o.model, *r.cluster, po.training);
  if (const nlohmann::json s = stream_json(r); !s.is_null()) j["stream"] = s;
  if (r.grid) j["grid"] = grid_json(*r.grid);
  j["domains"] = o.domains;
  return j;
}

void print_plan(const PlanJobOptions& o, const PlanResult& r) {
  print_layout(o, r);
  if (!r.simulation.is_null()) {
    print_simulation(r.simulation, o.simulate);
    explain_simulation(o, r);
  }
  std::printf("why:\n");
  for (const auto& reason : r.layout.reasons) std::printf("  - %s\n", reason.c_str());
  if (r.grid) print_grid(*r.grid, o.devices);
}

}  // namespace tessera::engine
