#include "tessera/parallel/plan/plan.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "plan_search.hpp"

namespace tessera::parallel {

void PlanOptions::validate() const {
  model.validate();
  auto bad = [](const std::string& field, const std::string& why) { throw Error("plan: " + field + ": " + why); };
  if (static_cast<int>(image.size()) != model.dims)
    bad("image", "has " + std::to_string(image.size()) + " axes but the model is " + std::to_string(model.dims) + "-D");
  for (int64_t n : image)
    if (n < 1) bad("image", "every extent must be >= 1");
  if (devices < 1) bad("devices", "must be >= 1, got " + std::to_string(devices));
  if (device_memory_bytes < 1) bad("device_memory", "must be > 0");
  if (!(device_flops > 0)) bad("device_flops", "must be > 0");
  if (!(memory_bytes_per_second > 0)) bad("memory_bytes_per_second", "must be > 0");
  if (!(allreduce_bytes_per_second > 0)) bad("allreduce_bytes_per_second", "must be > 0");
  if (baseline_bytes < 0) bad("baseline_bytes", "must be >= 0");
  if (max_stages < 1) bad("max_stages", "must be >= 1");
  if (max_micro_batches < 1) bad("max_micro_batches", "must be >= 1");
  if (max_tile_candidates < 2) bad("max_tile_candidates", "must be >= 2");
  if (tile_inset && (*tile_inset < 1 || *tile_inset % unet_alignment(model) != 0))
    bad("tile", std::to_string(*tile_inset) + " is not a positive multiple of " + std::to_string(unet_alignment(model)));
  if (!(message_latency_seconds >= 0)) bad("message_latency_seconds", "must be >= 0");
}

namespace plan_detail {

// Aligned insets from the alignment up to the largest image axis (rounded up); a geometric
// subset when there are more than max_tile_candidates. Independent of memory, so more memory can only
// add feasible candidates.
std::vector<int64_t> tile_candidates(const PlanOptions& o, int64_t a) {
  if (o.tile_inset) return {*o.tile_inset};
  const int64_t largest = *std::max_element(o.image.begin(), o.image.end());
  const int64_t top = (largest + a - 1) / a;  // in units of a
  std::vector<int64_t> units;
  if (top <= o.max_tile_candidates) {
    for (int64_t m = 1; m <= top; ++m) units.push_back(m);
  } else {
    const double ratio = std::pow(double(top), 1.0 / double(o.max_tile_candidates - 1));
    double m = 1;
    for (int i = 0; i < o.max_tile_candidates; ++i, m *= ratio) {
      const auto u = std::min<int64_t>(top, std::llround(m));
      if (units.empty() || u > units.back()) units.push_back(u);
    }
    if (units.back() != top) units.push_back(top);
  }
  std::vector<int64_t> sides;
  for (int64_t u : units) sides.push_back(u * a);
  return sides;
}

namespace {

// Checkpointing modes searched: the one asked, else never and always for training (inference
// keeps no activations).
std::vector<ActivationCheckpoint> checkpoint_modes(const PlanOptions& o) {
  if (o.checkpoint) return {*o.checkpoint};
  if (o.training) return {ActivationCheckpoint::kNever, ActivationCheckpoint::kAlways};
  return {ActivationCheckpoint::kNever};
}

// M searched: 1, 2, 4, … up to max_micro_batches.
std::vector<int> micro_batch_values(const PlanOptions& o) {
  std::vector<int> micro;
  for (int m = 1; m <= o.max_micro_batches; m *= 2) micro.push_back(m);
  return micro;
}

// A stage's memory on one device with M micro-batches and checkpointing `ck`, baseline included.
StageCost stage_memory(const PlanOptions& o, const TileModel& tile, int micro_batches, ActivationCheckpoint ck) {
  const StageMemoryOptions mo = StageMemoryOptions{}
                                    .with_micro_batches(micro_batches)
                                    .with_schedule(o.schedule)
                                    .with_training(o.training)
                                    .with_checkpoint(ck);
  return [&o, &tile, mo, ck](int f, int l, int e) {
    return double(o.baseline_bytes + tile.stage(f, l).bytes(mo.in_flight(e), ck));
  };
}

bool better(const Candidate& a, const Candidate& b) {
  if (a.pass != b.pass) return a.pass < b.pass;
  if (a.dp * a.k != b.dp * b.k) return a.dp * a.k < b.dp * b.k;
  return a.peak < b.peak;
}

// The time of tile candidate t with M micro-batches (index mi) and the memory-balanced
// partition p: dp = min(⌊devices / K⌋, ⌈tiles / M⌉) replicas, each step (M + K − 1) times the
// slowest stage plus the slowest stage's ring allreduce of its gradients.
Candidate price(const PlanOptions& o, const TileModel& tile, size_t t, size_t mi, int M, Partition p,
                double recompute) {
  const int K = p.stages();
  Candidate c;
  c.t = int(t);
  c.m = int(mi);
  c.k = K;
  c.tiles = tile.tiles;
  c.dp = int(std::min<int64_t>(o.devices / K, (tile.tiles + M - 1) / M));
  c.steps = (tile.tiles + int64_t(c.dp) * M - 1) / (int64_t(c.dp) * M);
  double allreduce = 0;
  for (int s = 0, f = 0; s < K; f += p.sizes[s], ++s) {
    c.stage_seconds.push_back(recompute * tile.seconds(f, p.sizes[s]));
    c.max_stage_seconds = std::max(c.max_stage_seconds, c.stage_seconds.back());
    if (o.training && c.dp > 1) {
      const double bytes = double(tile.params(f, p.sizes[s])) * kFloatBytes;
      allreduce = std::max(allreduce, 2.0 * (c.dp - 1) / c.dp * bytes / o.allreduce_bytes_per_second);
    }
  }
  c.step = double(M + K - 1) * c.max_stage_seconds + allreduce;
  c.pass = double(c.steps) * c.step;
  c.peak = int64_t(p.max_cost);
  c.memory = std::move(p);
  return c;
}

// Every (M, K) of tile candidate t under checkpointing mode ci, M stopping at the tiles.
void search_tile_mode(const PlanOptions& o, const TileModel& tile, size_t t, size_t ci, Search& s) {
  const ActivationCheckpoint ck = s.modes[ci];
  const double recompute = ck == ActivationCheckpoint::kAlways && o.training ? 4.0 / 3.0 : 1.0;
  ModeResult& result = s.by_mode[ci];
  for (size_t mi = 0; mi < s.micro.size(); ++mi) {
    const int M = s.micro[mi];
    if (M > 1 && M > tile.tiles) break;
    auto parts = min_max_partitions(tile.layers, tile.k_max, stage_memory(o, tile, M, ck));
    for (int K = 1; K <= tile.k_max; ++K) {
      Partition& p = parts[K - 1];
      result.max_cost[t][mi].push_back(p.max_cost);
      s.note_memory(p.max_cost, tile.inset, K, M, ck);
      if (p.max_cost > double(o.device_memory_bytes)) continue;
      Candidate c = price(o, tile, t, mi, M, std::move(p), recompute);
      if (better(c, result.best)) result.best = std::move(c);
    }
  }
}

}  // namespace

// nullopt when the network cannot take T's input side (e.g. a `same` network whose input
// side is odd before a pooling).
std::optional<TileModel> model_tile(const PlanOptions& o, int64_t inset) {
  TileModel m;
  m.inset = inset;
  try {
    m.seq = unet_layer_sequence(o.model, inset + unet_remainder(o.model) + 2 * unet_halo(o.model));
  } catch (const Error&) {
    return std::nullopt;
  }
  const int n = m.layers = m.seq.size();
  m.k_max = std::min({n, o.devices, o.max_stages});
  const std::vector<int64_t> extra =
      o.memory_calibration.empty() ? std::vector<int64_t>{} : o.memory_calibration.extra_bytes(m.seq);
  m.terms.resize(size_t(n) * n);
  for (int i = 0; i < n; ++i)
    for (int j = i; j < n; ++j) m.terms[size_t(i) * n + j] = stage_terms(m.seq, i, j, o.training, extra);
  const auto seconds = o.training && !o.time_calibration.empty()
                           ? o.time_calibration.seconds(m.seq)
                           : predicted_layer_seconds(m.seq, o.device_flops, o.memory_bytes_per_second, o.training);
  m.seconds_prefix.assign(n + 1, 0.0);
  m.param_prefix.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    m.seconds_prefix[i + 1] = m.seconds_prefix[i] + seconds[i];
    m.param_prefix[i + 1] = m.param_prefix[i] + m.seq.layers[i].params;
  }
  m.tiles = 1;
  for (int64_t extent : o.image) m.tiles *= (extent + inset - 1) / inset;
  return m;
}

Search search(const PlanOptions& o) {
  Search s;
  s.sides = tile_candidates(o, unet_alignment(o.model));
  s.micro = micro_batch_values(o);
  s.modes = checkpoint_modes(o);
  s.by_mode.resize(s.modes.size());
  for (ModeResult& r : s.by_mode) r.max_cost.assign(s.sides.size(), std::vector<std::vector<double>>(s.micro.size()));
  for (size_t t = 0; t < s.sides.size(); ++t) {
    const std::optional<TileModel> tile = model_tile(o, s.sides[t]);
    if (!tile) continue;
    for (size_t ci = 0; ci < s.modes.size(); ++ci) search_tile_mode(o, *tile, t, ci, s);
  }
  return s;
}

// The mode whose best layout is best; ties keep the earlier (never).
size_t choose_mode(const Search& s) {
  size_t chosen = 0;
  for (size_t ci = 1; ci < s.modes.size(); ++ci) {
    const Candidate &c = s.by_mode[ci].best, &current = s.by_mode[chosen].best;
    if (c.t >= 0 && (current.t < 0 || better(c, current))) chosen = ci;
  }
  return chosen;
}

Error nothing_fits(const PlanOptions& o, const Search& s) {
  if (s.least_memory == kInf) return Error("plan: image: no tile inset gives a valid input side for this model");
  return Error(fmt::format("plan: device_memory: nothing fits in {:.3g} GiB per device; the least any layout needs is "
                           "{:.3g} GiB ({}, baseline {:.3g} GiB included)",
                           gib(double(o.device_memory_bytes)), gib(s.least_memory), s.least_memory_at,
                           gib(double(o.baseline_bytes))));
}

Layout layout_of(const PlanOptions& o, const Search& s, size_t chosen) {
  const Candidate& best = s.by_mode[chosen].best;
  const UNetOptions& model = o.model;
  const int64_t T = s.sides[best.t];
  const int M = s.micro[best.m], K = best.k;
  Layout L;
  L.tile_inset = T;
  L.alignment = unet_alignment(model);
  L.tile_input_side = T + unet_remainder(model) + 2 * unet_halo(model);
  L.tile_output_side = T + unet_remainder(model);
  for (int64_t extent : o.image) L.tiles_per_axis.push_back((extent + T - 1) / T);
  L.tiles = best.tiles;
  L.halo_overhead = std::pow(double(L.tile_input_side) / double(T), model.dims);
  L.stages = K;
  L.balance = best.memory.sizes;
  const LayerSequence seq = unet_layer_sequence(model, L.tile_input_side);
  for (int st = 0; st < K; ++st) L.stage_first_layer.push_back(seq.layers[best.memory.first(st)].name);
  L.micro_batches = M;
  L.schedule = o.schedule;
  L.checkpoint = s.modes[chosen];
  L.data_parallel = best.dp;
  L.devices_used = best.dp * K;
  for (double c : best.memory.stage_costs) L.stage_memory_bytes.push_back(int64_t(c));
  L.peak_memory_bytes = best.peak;
  L.stage_seconds = best.stage_seconds;
  L.bubble_fraction = double(K - 1) / double(M + K - 1);
  L.step_seconds = best.step;
  L.steps = best.steps;
  L.pass_seconds = best.pass;
  L.device_flops = o.device_flops;
  return L;
}

}  // namespace plan_detail
}  // namespace tessera::parallel
