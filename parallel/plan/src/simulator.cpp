// One pass of a layout on a cluster: per-layer costs → stage costs → the event-by-event step
// (simulator_schedule.cpp) → the pass and its breakdown. Model in simulator.hpp.
#include "tessera/parallel/plan/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tessera/core/error.hpp"

namespace tessera::parallel {
namespace {

int64_t activation_bytes(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

// Bytes stage s sends to s + 1 per micro-batch: its last layer's output and every skip
// tensor whose producer is on this side of the cut and consumer on the other.
double cut_bytes(const LayerSequence& seq, int last, Precision p) {
  double elements = static_cast<double>(seq.layers[last].out_elements);
  for (const SkipEdge& e : seq.skips)
    if (e.producer <= last && e.consumer > last) elements += static_cast<double>(e.cropped_elements);
  return elements * activation_bytes(p);
}

// Link between the devices of pipeline stages s and s + 1 (stages packed onto nodes in order).
double send_seconds(double bytes, int s, const ClusterModel& c) {
  const bool crosses_node = (s + 1) % c.devices_per_node == 0;
  return crosses_node ? c.inter_node_latency_seconds + bytes / c.inter_node_bytes_per_second
                      : c.intra_node_latency_seconds + bytes / c.intra_node_bytes_per_second;
}

StageMemoryOptions memory_options(const SimulationOptions& o) {
  return StageMemoryOptions{}
      .with_micro_batches(o.micro_batches)
      .with_schedule(o.schedule)
      .with_training(o.training)
      .with_checkpoint(o.training ? o.checkpoint : ActivationCheckpoint::kNever);
}

Partition cut_stages(const SimulationOptions& o, const std::vector<double>& train_seconds) {
  return balance(o.balance, o.sequence, o.pipeline_stages, memory_options(o), train_seconds);
}

int64_t input_tile_bytes(const SimulationOptions& o) {
  int64_t n = o.sequence.options.in_channels;
  for (int a = 0; a < o.sequence.options.dims; ++a) n *= o.sequence.input_side;
  return n * o.input_bytes_per_element;
}

}  // namespace

void SimulationOptions::validate(const ClusterModel& c) const {
  auto at_least_one = [](const char* field, int64_t v) {
    if (v < 1) throw Error(std::string(field) + " must be >= 1, got " + std::to_string(v));
  };
  at_least_one("--tiles", tiles);
  at_least_one("--dp", data_parallel);
  at_least_one("--pp", pipeline_stages);
  at_least_one("--sp", spatial);
  at_least_one("--micro-batches", micro_batches);
  at_least_one("tiles per micro-batch", tiles_per_micro_batch);
  if (!layer_train_seconds.empty() && static_cast<int>(layer_train_seconds.size()) != sequence.size())
    throw Error("layer times: " + std::to_string(layer_train_seconds.size()) + " measured, the model has " +
                std::to_string(sequence.size()) + " layers (recalibrate: tessera plan --calibrate)");
  for (double t : layer_train_seconds)
    if (!(t >= 0) || !std::isfinite(t)) throw Error("layer times: each must be a finite number of seconds >= 0");
  if (spatial > 1 && pipeline_stages > 1) throw Error("--sp with --pp is not simulated (nor run): use one of them");
  if (pipeline_stages > sequence.size())
    throw Error("--pp " + std::to_string(pipeline_stages) + " exceeds the model's " + std::to_string(sequence.size()) +
                " layers");
  const int64_t devices = int64_t{data_parallel} * pipeline_stages * spatial;
  const int64_t available = int64_t{c.nodes} * c.devices_per_node;
  if (devices > available)
    throw Error("dp × pp × sp = " + std::to_string(devices) + " devices exceed the " + std::to_string(available) +
                " of " + std::to_string(c.nodes) + " nodes × " + std::to_string(c.devices_per_node) + " (--nodes)");
  if (per_tile_overhead_seconds < 0) throw Error("per-tile overhead must be >= 0");
}

namespace {

// Spatial ranks: the largest block's share of the tile, its halo exchanges' seconds per
// micro-batch and the bytes a block holds (all 1, 0, 0 without --sp).
struct SpatialShare {
  double block_share = 1, halo_per_micro_batch = 0;
  int64_t bytes = 0;
};

SpatialShare spatial_share(const SimulationOptions& o, const ClusterModel& c) {
  SpatialShare share;
  if (o.spatial <= 1) return share;
  const LayerSequence& seq = o.sequence;
  const std::vector<std::vector<int>> meshes = spatial_meshes(o.spatial, seq.options.dims);
  const bool one_node = o.spatial <= c.devices_per_node;
  const SpatialPlan sp = spatial_plan(
      seq, meshes.back(),
      SpatialPlanOptions{}
          .with_training(o.training)
          .with_latency_seconds(one_node ? c.intra_node_latency_seconds : c.inter_node_latency_seconds)
          .with_bytes_per_second(one_node ? c.intra_node_bytes_per_second : c.inter_node_bytes_per_second));
  double block = 1, whole = 1;
  for (int64_t e : sp.largest_block) block *= static_cast<double>(e);
  for (int a = 0; a < seq.options.dims; ++a) whole *= static_cast<double>(seq.input_side);
  share.block_share = block / whole;
  share.halo_per_micro_batch = sp.halo_seconds * o.tiles_per_micro_batch;
  share.bytes = sp.bytes;
  return share;
}

// Every stage's forward, backward, send, allreduce, update and recompute seconds per
// micro-batch (`pass`: each layer's seconds for one micro-batch), and the read of its tiles.
StageCosts stage_costs(const SimulationOptions& o, const ClusterModel& c, const Partition& part,
                       const LayerPassSeconds& pass, const SpatialShare& share) {
  const LayerSequence& seq = o.sequence;
  const int K = o.pipeline_stages;
  StageCosts costs;
  const int devices_per_replica = K * o.spatial;
  const double io_per_device = c.io_bytes_per_second_per_node / std::min(c.devices_per_node, o.data_parallel * devices_per_replica);
  const double b = o.tiles_per_micro_batch;
  costs.read = b * (static_cast<double>(input_tile_bytes(o)) / io_per_device + o.per_tile_overhead_seconds);
  // Ranks of one stage's allreduce on a node: one per pipeline replica there, and every
  // spatial rank (all sp ranks of a replica hold the whole network's gradients).
  const int per_node = std::max(1, c.devices_per_node / K);
  for (int s = 0; s < K; ++s) {
    const int first = part.first(s), last = first + part.sizes[s] - 1;
    double f = 0, bwd = 0, params = 0;
    for (int l = first; l <= last; ++l) {
      f += pass.forward[l];
      bwd += pass.backward[l];
      params += static_cast<double>(seq.layers[l].params);
    }
    f *= share.block_share;
    bwd *= share.block_share;
    // Halo exchanges: half in the forward, half in the backward (training).
    const double halo_f = o.training ? share.halo_per_micro_batch / 2 : share.halo_per_micro_batch;
    costs.forward.push_back(f + halo_f);
    if (o.training) costs.backward.push_back(bwd + share.halo_per_micro_batch - halo_f);
    if (o.training && o.checkpoint != ActivationCheckpoint::kNever) costs.recompute.push_back(f);
    if (s + 1 < K) costs.send.push_back(send_seconds(b * cut_bytes(seq, last, o.precision), s, c));
    if (o.training)
      costs.allreduce.push_back(hierarchical_allreduce_seconds(4 * params, o.data_parallel * o.spatial, per_node, c));
    if (o.training && o.optimizer_step) costs.update.push_back(28 * params / c.device.memory_bytes_per_second);
  }
  costs.recompute_last = o.checkpoint == ActivationCheckpoint::kAlways;
  return costs;
}

// One step's breakdown: the busiest stage's compute, the allreduce tail after the last
// backward, the reads that stage 0 serialises, the rest is bubble.
TimeBreakdown step_breakdown(const ScheduleResult& step, const StageCosts& costs, double halo, int micro_batches) {
  double compute_end = 0;
  for (const ScheduleEvent& e : step.events)
    if (e.kind != ScheduleEvent::Kind::kAllreduce && e.kind != ScheduleEvent::Kind::kUpdate)
      compute_end = std::max(compute_end, e.end);
  const double busiest = *std::max_element(step.busy.begin(), step.busy.end());
  const double update = costs.update.empty() ? 0.0 : *std::max_element(costs.update.begin(), costs.update.end());
  TimeBreakdown t;
  t.optimizer = std::min(update, step.makespan - compute_end);
  t.allreduce = step.makespan - compute_end - t.optimizer;
  t.halo = halo;
  t.compute = busiest - halo;
  t.io = std::min(costs.read * micro_batches, std::max(0.0, compute_end - busiest));
  t.bubble = std::max(0.0, compute_end - busiest - t.io);
  return t;
}

}  // namespace

SimulationResult simulate(const SimulationOptions& o, const ClusterModel& c) {
  o.validate(c);
  const LayerSequence& seq = o.sequence;
  const int K = o.pipeline_stages, M = o.micro_batches;
  SimulationResult r;

  // Seconds per layer for one tile and for one micro-batch: measured (forward + backward
  // split 1 : 2, b × one tile) or modelled.
  auto layer_seconds = [&](int tiles) {
    if (o.layer_train_seconds.empty()) return layer_pass_seconds(seq, c.device, o.precision, tiles);
    LayerPassSeconds m;
    for (double t : o.layer_train_seconds) {
      m.forward.push_back(tiles * t / 3.0);
      m.backward.push_back(tiles * 2 * t / 3.0);
    }
    return m;
  };
  const LayerPassSeconds tile = layer_seconds(1);
  for (size_t l = 0; l < tile.forward.size(); ++l)
    r.layer_seconds.push_back(tile.forward[l] + (o.training ? tile.backward[l] : 0.0));
  r.tile_seconds = std::accumulate(r.layer_seconds.begin(), r.layer_seconds.end(), 0.0);
  r.tile_flops = seq.flops() * (o.training ? 3.0 : 1.0);

  const Partition part = cut_stages(o, r.layer_seconds);
  r.balance = part.sizes;
  const SpatialShare share = spatial_share(o, c);
  const StageCosts costs = stage_costs(o, c, part, layer_seconds(o.tiles_per_micro_batch), share);
  const ScheduleResult step = simulate_schedule(costs, M, o.schedule);
  r.events = step.events;
  r.step_seconds = step.makespan;
  const int64_t tiles_per_step = int64_t{o.data_parallel} * M * o.tiles_per_micro_batch;
  r.steps = (o.tiles + tiles_per_step - 1) / tiles_per_step;
  r.pass_seconds = r.step_seconds * static_cast<double>(r.steps);

  const TimeBreakdown t = step_breakdown(step, costs, o.spatial > 1 ? share.halo_per_micro_batch * M : 0, M);
  const double n = static_cast<double>(r.steps);
  r.breakdown = {t.compute * n, t.bubble * n, t.halo * n, t.allreduce * n, t.io * n, t.optimizer * n};

  const StageMemoryOptions mem = memory_options(o);
  for (int s = 0; s < K; ++s) {
    const int first = part.first(s), last = first + part.sizes[s] - 1;
    const int64_t bytes = o.spatial > 1 ? share.bytes : stage_bytes(seq, first, last, K - s, mem);
    r.device_peak_bytes.push_back(bytes + c.device.baseline_bytes);
    if (r.device_peak_bytes.back() > c.device.memory_bytes) r.fits_memory = false;
  }
  return r;
}

LayerSequence simulated_layer_sequence(const UNetOptions& o, int64_t side) {
  if (o.name.rfind("s0-", 0) == 0) return seed_unet_layer_sequence(o, side);
  return unet_layer_sequence(o, side);
}

}  // namespace tessera::parallel
