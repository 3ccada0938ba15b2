#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "plan_search.hpp"

namespace tessera::parallel::plan_detail {
namespace {

SpatialCandidate price_spatial(const PlanOptions& o, const TileModel& tile, SpatialPlan plan) {
  SpatialCandidate c;
  c.inset = tile.inset;
  c.sp = 1;
  for (int p : plan.parts) c.sp *= p;
  c.tiles = tile.tiles;
  c.dp = int(std::min<int64_t>(o.devices / c.sp, tile.tiles));
  c.steps = (tile.tiles + c.dp - 1) / c.dp;
  double share = 1;  // the largest block's share of the tile's work
  for (int64_t e : plan.largest_block) share *= double(e) / double(tile.seq.input_side);
  c.tile_seconds = tile.seconds(0, tile.layers) * share + plan.halo_seconds;
  const int ranks = c.sp * c.dp;  // every rank holds every gradient
  const double allreduce = o.training && ranks > 1 ? 2.0 * (ranks - 1) / ranks * double(tile.params(0, tile.layers)) *
                                                         kFloatBytes / o.allreduce_bytes_per_second
                                                   : 0.0;
  c.step = c.tile_seconds + allreduce;
  c.pass = double(c.steps) * c.step;
  c.peak = o.baseline_bytes + plan.bytes;
  c.plan = std::move(plan);
  return c;
}

bool better_spatial(const SpatialCandidate& a, const SpatialCandidate& b) {
  if (a.pass != b.pass) return a.pass < b.pass;
  if (a.dp * a.sp != b.dp * b.sp) return a.dp * a.sp < b.dp * b.sp;
  return a.peak < b.peak;
}

// sp searched: 2, 4, 8, … and every device.
std::vector<int> spatial_degrees(int devices) {
  std::vector<int> out;
  for (int sp = 2; sp <= devices; sp *= 2) out.push_back(sp);
  if (devices > 1 && out.back() != devices) out.push_back(devices);
  return out;
}

}  // namespace

SpatialSearch search_spatial(const PlanOptions& o, const Search& s) {
  SpatialSearch out;
  if (!o.consider_spatial || o.model.padding != Padding::kSame || o.devices < 2) return out;
  const auto po = SpatialPlanOptions()
                      .with_training(o.training)
                      .with_latency_seconds(o.message_latency_seconds)
                      .with_bytes_per_second(o.allreduce_bytes_per_second);
  for (int64_t inset : s.sides) {
    const std::optional<TileModel> tile = model_tile(o, inset);
    if (!tile) continue;
    for (int sp : spatial_degrees(o.devices))
      for (const std::vector<int>& parts : spatial_meshes(sp, o.model.dims)) {
        SpatialPlan plan;
        try {
          plan = spatial_plan(tile->seq, parts, po);
        } catch (const Error&) {
          continue;  // the tile is too small for this split
        }
        const double bytes = double(o.baseline_bytes + plan.bytes);
        if (bytes < out.least_memory) {
          out.least_memory = bytes;
          out.least_memory_at = fmt::format("T = {}, sp = {}", inset, sp);
        }
        if (bytes > double(o.device_memory_bytes)) continue;
        SpatialCandidate c = price_spatial(o, *tile, std::move(plan));
        if (better_spatial(c, out.best)) out.best = std::move(c);
      }
  }
  return out;
}

Layout spatial_layout(const PlanOptions& o, const SpatialCandidate& c) {
  const UNetOptions& model = o.model;
  Layout L;
  L.tile_inset = c.inset;
  L.alignment = unet_alignment(model);
  L.tile_input_side = c.inset + unet_remainder(model) + 2 * unet_halo(model);
  L.tile_output_side = c.inset + unet_remainder(model);
  for (int64_t extent : o.image) L.tiles_per_axis.push_back((extent + c.inset - 1) / c.inset);
  L.tiles = c.tiles;
  L.halo_overhead = std::pow(double(L.tile_input_side) / double(c.inset), model.dims);
  const LayerSequence seq = unet_layer_sequence(model, L.tile_input_side);
  L.stages = 1;
  L.balance = {seq.size()};
  L.stage_first_layer = {seq.layers.front().name};
  L.micro_batches = 1;
  L.schedule = o.schedule;
  L.checkpoint = ActivationCheckpoint::kNever;
  L.data_parallel = c.dp;
  L.devices_used = c.dp * c.sp;
  L.spatial = c.sp;
  L.spatial_mesh = c.plan.parts;
  L.halo_bytes_per_step = c.plan.halo_bytes;
  L.halo_seconds = c.plan.halo_seconds;
  L.stage_memory_bytes = {c.peak};
  L.peak_memory_bytes = c.peak;
  L.stage_seconds = {c.tile_seconds};
  L.bubble_fraction = 0;
  L.step_seconds = c.step;
  L.steps = c.steps;
  L.pass_seconds = c.pass;
  L.device_flops = o.device_flops;
  return L;
}

}  // namespace tessera::parallel::plan_detail
