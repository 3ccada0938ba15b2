#include "tessera/parallel/plan/grid_plan.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "plan_search.hpp"
#include "tessera/core/dsn_spec.hpp"

namespace tessera::parallel {
namespace {

using namespace plan_detail;

constexpr int kGridTiles = 8;  // tile insets searched per combination

// Powers of two from 1 up to `limit`.
std::vector<int> doublings(int limit) {
  std::vector<int> out;
  for (int v = 1; v <= limit; v *= 2) out.push_back(v);
  return out;
}

// At most kGridTiles of the planner's tile candidates, spread evenly over them.
std::vector<int64_t> grid_tiles(const PlanOptions& o) {
  const std::vector<int64_t> all = tile_candidates(o, unet_alignment(o.model));
  if (all.size() <= size_t(kGridTiles)) return all;
  std::vector<int64_t> out;
  for (int i = 0; i < kGridTiles; ++i) out.push_back(all[size_t(i) * (all.size() - 1) / (kGridTiles - 1)]);
  return out;
}

// What one tile split over one mesh costs whatever K and M: the largest block's layer
// sequence, the stage terms of its every range, its share of the tile's work and the
// decomposition's tensors beyond the block's own.
struct BlockModel {
  LayerSequence seq;
  int layers = 0;
  std::vector<StageTerms> terms;
  double share = 1;
  int64_t decomposition_bytes = 0;
  double halo_seconds = 0;
  const StageTerms& stage(int first, int last) const { return terms[size_t(first) * layers + last]; }
};

// `seq` is the whole tile's layer sequence; `parts` empty: no split.
BlockModel model_block(const PlanOptions& o, const LayerSequence& seq, const std::vector<int>& parts) {
  BlockModel b;
  if (parts.empty()) {
    b.seq = seq;
  } else {
    const auto po = SpatialPlanOptions()
                        .with_training(o.training)
                        .with_latency_seconds(o.message_latency_seconds)
                        .with_bytes_per_second(o.allreduce_bytes_per_second);
    const SpatialPlan sp = spatial_plan(seq, parts, po);  // throws when the tile cannot be split
    b.seq = box_layer_sequence(o.model, sp.largest_block);
    for (int64_t e : sp.largest_block) b.share *= double(e) / double(seq.input_side);
    const int64_t whole_block = stage_bytes(b.seq, 0, b.seq.size() - 1, 1, StageMemoryOptions().with_training(o.training));
    b.decomposition_bytes = std::max<int64_t>(0, sp.bytes - whole_block);
    b.halo_seconds = sp.halo_seconds;
  }
  const int n = b.layers = b.seq.size();
  b.terms.resize(size_t(n) * n);
  for (int i = 0; i < n; ++i)
    for (int j = i; j < n; ++j) b.terms[size_t(i) * n + j] = stage_terms(b.seq, i, j, o.training, {});
  return b;
}

// The memory-aware balance of K stages over the block and the per-rank peak it gives: the
// largest stage, the decomposition's tensors of the micro-batches the first stage holds
// (shared by the K stages), the domain's state and the baseline.
int64_t rank_bytes(const PlanOptions& o, const BlockModel& b, int K, int M, int64_t domain_bytes, Partition& part) {
  const ActivationCheckpoint ck = o.checkpoint.value_or(ActivationCheckpoint::kNever);
  const auto mo = StageMemoryOptions().with_micro_batches(M).with_schedule(o.schedule).with_training(o.training);
  part = min_max_partition(b.layers, K, [&](int f, int l, int e) { return double(b.stage(f, l).bytes(mo.in_flight(e), ck)); });
  return o.baseline_bytes + int64_t(part.max_cost) + b.decomposition_bytes * mo.in_flight(K) / K + domain_bytes;
}

// 16 B per parameter of what a domain adds to every rank of its group: its private encoder,
// the reconstruction decoder and the domain classifier.
int64_t domain_state_bytes(const PlanOptions& o, int domains) {
  if (domains < 2) return 0;
  DsnOptions dsn;
  dsn.domains = domains;
  return 16 * (dsn_private_parameter_count(o.model, dsn) + dsn_recon_parameter_count(o.model, dsn) +
               dsn_classifier_parameter_count(o.model, dsn));
}

double ring_seconds(const PlanOptions& o, int ranks, double bytes) {
  return ranks > 1 ? 2.0 * (ranks - 1) / ranks * bytes / o.allreduce_bytes_per_second : 0.0;
}

struct Pricing {
  const PlanOptions& o;
  int domains;
  int group;  // devices per domain
  int64_t domain_bytes;
};

// Every (K, M) of one tile and mesh, each K's best kept in `best` (by K index).
void price(const Pricing& p, const TileModel& tile, const BlockModel& b, const std::vector<int>& parts, int P,
           std::vector<GridLayout>& best) {
  const PlanOptions& o = p.o;
  const ActivationCheckpoint ck = o.checkpoint.value_or(ActivationCheckpoint::kNever);
  const std::vector<int> ks = doublings(std::min({o.max_stages, b.layers, p.group / P}));
  for (size_t ki = 0; ki < ks.size(); ++ki) {
    const int K = ks[ki];
    for (int M : K == 1 ? std::vector<int>{1} : doublings(o.max_micro_batches)) {
      if (M > tile.tiles) break;
      Partition part;
      GridLayout g;
      g.domains = p.domains, g.stages = K, g.spatial = P, g.mesh = parts, g.micro_batches = M;
      g.tile_inset = tile.inset;
      g.rank_bytes = rank_bytes(o, b, K, M, p.domain_bytes, part);
      g.fits = g.rank_bytes <= o.device_memory_bytes;
      g.data_parallel = int(std::min<int64_t>(p.group / (K * P), (tile.tiles + M - 1) / M));
      g.devices_used = p.domains * g.data_parallel * K * P;
      double slowest = 0;
      int64_t stage_params = 0;
      for (int s = 0, first = 0; s < K; first += part.sizes[size_t(s)], ++s) {
        slowest = std::max(slowest, tile.seconds(first, part.sizes[size_t(s)]) * b.share + b.halo_seconds / K);
        stage_params = std::max(stage_params, tile.params(first, part.sizes[size_t(s)]));
      }
      const double ck_factor = ck == ActivationCheckpoint::kNever ? 1.0 : 4.0 / 3.0;
      g.step_seconds = (M + K - 1) * slowest * ck_factor +
                       ring_seconds(o, g.data_parallel * P, double(stage_params) * kFloatBytes) +
                       ring_seconds(o, p.domains, double(tile.params(0, tile.layers)) * kFloatBytes / K);
      g.halo_seconds = (M + K - 1) * b.halo_seconds / K * ck_factor;
      g.steps = (tile.tiles + int64_t(g.data_parallel) * M - 1) / (int64_t(g.data_parallel) * M);
      g.pass_seconds = double(g.steps) * g.step_seconds;
      GridLayout& b_k = best[ki];
      const bool better = b_k.tile_inset == 0 || (g.fits && !b_k.fits) ||
                          (g.fits == b_k.fits && (g.fits ? g.pass_seconds < b_k.pass_seconds
                                                         : g.rank_bytes < b_k.rank_bytes));
      if (better) b_k = g;
    }
  }
}

std::string mesh_text(const std::vector<int>& parts) {
  std::string t;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) t += (t.empty() ? "" : "×") + std::to_string(*it);
  return t;
}

std::string describe(const GridLayout& g) {
  return fmt::format("dp {} × pp {} × sp {}{} × {} domain{}", g.data_parallel, g.stages, g.spatial,
                     g.mesh.empty() ? "" : " (" + mesh_text(g.mesh) + ")", g.domains, g.domains == 1 ? "" : "s");
}

// The verdicts: "chosen", or memory / time against the chosen layout.
void explain(const PlanOptions& o, GridPlan& plan) {
  const GridLayout& c = plan.layouts[plan.chosen];
  for (size_t i = 0; i < plan.layouts.size(); ++i) {
    GridLayout& g = plan.layouts[i];
    if (i == plan.chosen)
      g.verdict = "chosen";
    else if (!g.fits)
      g.verdict = fmt::format("does not fit: needs {:.2f} GiB per rank at best, {:.2f} GiB there", gib(double(g.rank_bytes)),
                              gib(double(o.device_memory_bytes)));
    else
      g.verdict = fmt::format("slower: {:.3g} s per pass against {:.3g} s ({:+.0f}%): {} steps of {:.3g} s{}{}",
                              g.pass_seconds, c.pass_seconds, 100.0 * (g.pass_seconds / c.pass_seconds - 1), g.steps,
                              g.step_seconds,
                              g.stages > 1 ? fmt::format(", bubble (K − 1)/(M + K − 1) = {:.2f}",
                                                         double(g.stages - 1) / (g.micro_batches + g.stages - 1))
                                           : "",
                              g.spatial > 1 ? fmt::format(", halo exchanges {:.2g} s", g.halo_seconds) : "");
  }
  plan.reasons.push_back(fmt::format("chosen: {} on {} of {} devices, inset {}, M = {}: {:.3g} s per pass ({} steps of "
                                     "{:.3g} s), {:.2f} GiB per rank of {:.2f} GiB",
                                     describe(c), c.devices_used, o.devices, c.tile_inset, c.micro_batches,
                                     c.pass_seconds, c.steps, c.step_seconds, gib(double(c.rank_bytes)),
                                     gib(double(o.device_memory_bytes))));
  if (c.domains > 1)
    plan.reasons.push_back(fmt::format("domains: {} groups of {} devices, each on its own image{}; every rank also holds "
                                       "its domain's private encoder, the reconstruction decoder and the classifier",
                                       c.domains, o.devices / c.domains,
                                       o.devices % c.domains ? fmt::format(" ({} of the {} devices left idle: the groups are equal)",
                                                                           o.devices % c.domains, o.devices)
                                                             : ""));
}

}  // namespace

int64_t layout_rank_bytes(const PlanOptions& o, const LayerSequence& seq, int domains, int stages,
                          const std::vector<int>& mesh, int micro_batches) {
  const BlockModel b = model_block(o, seq, mesh);
  if (stages < 1 || stages > b.layers)
    throw Error("pp: " + std::to_string(stages) + " stages for " + std::to_string(b.layers) + " layers");
  Partition part;
  return rank_bytes(o, b, stages, micro_batches, domain_state_bytes(o, domains), part);
}

GridPlan plan_grid(const PlanOptions& o, int domains) {
  o.validate();
  if (domains < 1 || domains > o.devices)
    throw Error("domains: " + std::to_string(domains) + " must be in 1 … devices (" + std::to_string(o.devices) + ")");
  const Pricing p{o, domains, o.devices / domains, domain_state_bytes(o, domains)};
  const bool spatial = o.consider_spatial && o.model.padding == Padding::kSame;
  const std::vector<int> sps = spatial ? doublings(p.group) : std::vector<int>{1};
  std::vector<std::vector<GridLayout>> best(sps.size());  // [sp][K]
  for (int64_t inset : grid_tiles(o)) {
    const std::optional<TileModel> tile = model_tile(o, inset);
    if (!tile) continue;
    for (size_t si = 0; si < sps.size(); ++si) {
      const int P = sps[si];
      for (const std::vector<int>& parts : P == 1 ? std::vector<std::vector<int>>{{}} : spatial_meshes(P, o.model.dims)) {
        std::optional<BlockModel> block;
        try {
          block = model_block(o, tile->seq, parts);
        } catch (const Error&) {
          continue;  // the tile is too small for this split
        }
        if (best[si].empty()) best[si].resize(doublings(o.max_stages).size());
        price(p, *tile, *block, parts, P, best[si]);
      }
    }
  }
  GridPlan plan;
  for (const auto& by_k : best)
    for (const GridLayout& g : by_k)
      if (g.tile_inset > 0) plan.layouts.push_back(g);
  std::stable_sort(plan.layouts.begin(), plan.layouts.end(),
                   [](const GridLayout& a, const GridLayout& b) { return std::tie(a.stages, a.spatial) < std::tie(b.stages, b.spatial); });
  const auto fastest = std::min_element(plan.layouts.begin(), plan.layouts.end(), [](const GridLayout& a, const GridLayout& b) {
    if (a.fits != b.fits) return a.fits;
    if (!a.fits) return a.rank_bytes < b.rank_bytes;
    return a.pass_seconds != b.pass_seconds ? a.pass_seconds < b.pass_seconds : a.devices_used < b.devices_used;
  });
  if (fastest == plan.layouts.end() || !fastest->fits)
    throw Error(fmt::format("device_memory: no combination of dp × pp × sp × {} domains fits {:.2f} GiB per device; "
                            "the least any needs is {:.2f} GiB",
                            domains, gib(double(o.device_memory_bytes)),
                            fastest == plan.layouts.end() ? 0.0 : gib(double(fastest->rank_bytes))));
  plan.chosen = size_t(fastest - plan.layouts.begin());
  explain(o, plan);
  return plan;
}

}  // namespace tessera::parallel
