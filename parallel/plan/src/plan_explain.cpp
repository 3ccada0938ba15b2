#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "plan_search.hpp"

namespace tessera::parallel::plan_detail {
namespace {

std::string mesh_text(const std::vector<int>& parts) {
  std::string t;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) t += (t.empty() ? "" : " × ") + std::to_string(*it);
  return t;
}

}  // namespace

// Which memory limits bind: the pipeline (K − 1 stages would not fit), the tile (the next
// inset would not fit with the same K and M) or the image (no larger inset).
void explain_memory(const PlanOptions& o, const Search& s, size_t chosen, const Layout& L,
                    std::vector<std::string>& why) {
  const Candidate& best = s.by_mode[chosen].best;
  const auto& max_cost = s.by_mode[chosen].max_cost;
  const double limit = double(o.device_memory_bytes);
  const int K = L.stages;
  const auto& costs = max_cost[best.t][best.m];
  why.push_back(fmt::format("memory: the largest stage needs {:.2f} GiB of {:.2f} GiB ({:.0f}%)",
                            gib(double(L.peak_memory_bytes)), gib(limit), 100.0 * double(L.peak_memory_bytes) / limit));
  if (K > 1 && costs[K - 2] > limit)
    why.push_back(fmt::format("memory binds the pipeline: with K = {} stages the largest would need {:.2f} GiB, so "
                              "the network is cut into {} stages",
                              K - 1, gib(costs[K - 2]), K));
  if (size_t(best.t) + 1 >= s.sides.size()) {
    why.push_back("image binds the tile: the inset covers the largest image axis");
    return;
  }
  const auto& next = max_cost[best.t + 1];
  const bool searched = best.m < int(next.size()) && K <= int(next[best.m].size());
  if (searched && next[best.m][K - 1] > limit)
    why.push_back(fmt::format("memory binds the tile: inset {} would need {:.2f} GiB with the same K and M",
                              s.sides[best.t + 1], gib(next[best.m][K - 1])));
}

// Halo overhead, what bounds dp (the tiles or the devices) and the pipeline's bubble.
void explain_parallelism(const PlanOptions& o, const Search& s, size_t chosen, const Layout& L,
                         std::vector<std::string>& why) {
  const int K = L.stages, M = L.micro_batches, dp = L.data_parallel;
  const bool larger_tile_exists = size_t(s.by_mode[chosen].best.t) + 1 < s.sides.size();
  why.push_back(fmt::format("halo overhead: E = ({} / {})^{} = {:.2f} input pixels read per pixel kept{}",
                            L.tile_input_side, L.tile_inset, o.model.dims, L.halo_overhead,
                            larger_tile_exists ? "; larger insets lower E but leave fewer tiles to spread" : ""));
  const int64_t by_tiles = (L.tiles + M - 1) / M;
  if (dp == by_tiles && L.devices_used < o.devices)
    why.push_back(fmt::format("tiles bind: {} tiles per pass with M = {} give work to dp = {} replicas; {} of {} devices idle",
                              L.tiles, M, dp, o.devices - L.devices_used, o.devices));
  if (dp == o.devices / K)
    why.push_back(fmt::format("devices bind: dp = floor({} / {}) = {} replicas, {} step(s) per pass", o.devices, K, dp,
                              L.steps));
  if (K == 1)
    why.push_back("pipeline: none needed, one device holds a whole tile");
  else
    why.push_back(fmt::format("pipeline: K = {} ({} schedule), bubble (K − 1)/(M + K − 1) = {:.2f}", K,
                              to_string(o.schedule), L.bubble_fraction));
}

// Checkpointing (as asked, or what the other mode would have cost) and where the times come from.
void explain_checkpoint_and_time(const PlanOptions& o, const Search& s, size_t chosen, const Layout& L,
                                 std::vector<std::string>& why) {
  if (o.checkpoint) {
    if (*o.checkpoint != ActivationCheckpoint::kNever)
      why.push_back(fmt::format("activation checkpointing: {} (as asked)", to_string(*o.checkpoint)));
  } else if (s.modes.size() > 1) {
    const Candidate& other = s.by_mode[1 - chosen].best;
    const std::string alternative =
        other.t < 0 ? "nothing fits without it"
                    : fmt::format("{} would take {:.3g} s per pass", chosen == 0 ? "with it" : "without it", other.pass);
    why.push_back(fmt::format("activation checkpointing: {} ({}; recomputing the forward costs a third more time "
                              "per stage)",
                              chosen == 0 ? "off" : "on", alternative));
  }
  if (o.training && !o.time_calibration.empty())
    why.push_back(fmt::format("time: {:.3g} s per pass from the measured per-layer times (forward + backward)",
                              L.pass_seconds));
  else
    why.push_back(fmt::format("time: {:.3g} s per pass at {:.3g} GFLOP/s per device ({})", L.pass_seconds,
                              o.device_flops / 1e9, o.training ? "forward + backward = 3 × forward FLOPs" : "forward only"));
}

// Why sp was chosen, or what it would have cost.
std::string explain_spatial(const PlanOptions& o, const SpatialSearch& sp, const Layout& L, bool chosen,
                            double pipeline_pass) {
  const double mib = double(1 << 20);
  if (chosen)
    return fmt::format("spatial: sp = {} ({} blocks, K = 1) because {}; each rank holds a block of the tile, halo "
                       "exchanges send {:.3g} MiB per step ({:.3g} s α-β for the busiest rank)",
                       L.spatial, mesh_text(L.spatial_mesh),
                       pipeline_pass == kInf ? "no pipeline layout fits"
                                             : fmt::format("it takes {:.3g} s per pass against {:.3g} s for the best "
                                                           "pipeline/data-parallel layout",
                                                           L.pass_seconds, pipeline_pass),
                       double(L.halo_bytes_per_step) / mib, L.halo_seconds);
  if (!o.consider_spatial) return "spatial: not considered (as asked)";
  if (o.model.padding != Padding::kSame) return "spatial: not considered: a `valid` network cannot be split (--padding same)";
  if (o.devices < 2) return "spatial: not considered: one device";
  const SpatialCandidate& c = sp.best;
  if (c.sp == 0)
    return sp.least_memory == kInf ? "spatial: no split of the tile candidates is possible (blocks below 2^(L−1))"
                                   : fmt::format("spatial: no split fits; the least any needs is {:.3g} GiB ({})",
                                                 gib(sp.least_memory), sp.least_memory_at);
  return fmt::format("spatial: not chosen: the best split, sp = {} ({}) at T = {}, would take {:.3g} s per pass "
                     "({:.3g} MiB of halos and {:.3g} s per step) against {:.3g} s",
                     c.sp, mesh_text(c.plan.parts), c.inset, c.pass, double(c.plan.halo_bytes) / mib,
                     c.plan.halo_seconds, L.pass_seconds);
}

}  // namespace tessera::parallel::plan_detail
