#include "tessera/parallel/planner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "tessera/core/error.hpp"
#include "tessera/parallel/spatial.hpp"

namespace tessera::parallel {
namespace {

constexpr int64_t kFloatBytes = 4;
constexpr double kInf = std::numeric_limits<double>::infinity();

void check_stages(int layers, int stages) {
  if (stages < 1 || stages > layers)
    throw Error("pipeline stages: K = " + std::to_string(stages) + " must be in 1.." + std::to_string(layers) +
                " (one layer at least per stage, " + std::to_string(layers) + " layers)");
}

double gib(double bytes) { return bytes / double(int64_t{1} << 30); }

// A stage's training memory: fixed (parameters, optimiser), every other micro-batch in
// flight held whole (received tensors + what autograd keeps), and the micro-batch being
// computed at its worst layer x: received + what layers first … x keep (layers after x have
// not run yet in the forward, are freed already in the backward) + x's input and output (or
// their gradients) + x's calibrated extra. Inference: weights + the largest working set.
struct StageTerms {
  int64_t fixed = 0;
  int64_t per_flight = 0;
  int64_t received = 0;  // what a checkpointed whole micro-batch keeps
  int64_t current = 0;

  int64_t bytes(int in_flight, ActivationCheckpoint c) const {
    switch (c) {
      case ActivationCheckpoint::kNever: return fixed + (in_flight - 1) * per_flight + current;
      case ActivationCheckpoint::kAlways: return fixed + (in_flight - 1) * received + current;
      case ActivationCheckpoint::kExceptLast:  // the last micro-batch whole beside a recomputed one
        return fixed + (in_flight >= 2 ? per_flight + (in_flight - 2) * received : 0) + current;
    }
    return 0;
  }
};

StageTerms stage_terms(const LayerSequence& seq, int first, int last, bool training,
                       const std::vector<int64_t>& extra) {
  TESSERA_CHECK(first >= 0 && first <= last && last < seq.size());
  if (!extra.empty() && static_cast<int>(extra.size()) != seq.size())
    throw Error("stage memory: extra_bytes has " + std::to_string(extra.size()) + " entries for " +
                std::to_string(seq.size()) + " layers");
  StageTerms t;
  int64_t received = 0;
  if (training) {
    received += seq.layers[first].in_elements * kFloatBytes;  // received activation / network input
    for (const auto& s : seq.skips)
      if (s.producer < first && s.consumer >= first && s.consumer <= last) received += s.cropped_elements * kFloatBytes;
  }
  int64_t kept = 0, work = 0;
  for (int x = first; x <= last; ++x) {
    const Layer& l = seq.layers[x];
    t.fixed += layer_bytes(l, 1, training) - (training ? l.saved_bytes : 0);
    int64_t live = (l.in_elements + l.out_elements) * kFloatBytes;
    if (training) {
      kept += l.saved_bytes;
      if (!extra.empty()) live += extra[size_t(x)];
      work = std::max(work, received + kept + live);
      continue;
    }
    // Inference: skips this stage holds at layer x (after their producer, up to and including
    // the concatenation): those consumed here, whether produced here or received.
    for (const auto& s : seq.skips)
      if (s.consumer <= last && s.consumer >= first && s.producer < x && x <= s.consumer)
        live += (s.producer >= first ? s.elements : s.cropped_elements) * kFloatBytes;
    work = std::max(work, live);
  }
  if (training) {
    // A stage keeps the output it sent on until that micro-batch's backward (the root of its
    // autograd graph). ReLU, pool, concatenation and head outputs are already in `kept`; a
    // convolution's, norm's or up-sampling's is counted at the layer consuming it, which
    // lives on the next stage, so here it is held twice.
    const Layer& out = seq.layers[size_t(last)];
    const bool counted = out.kind == LayerKind::kActivation || out.kind == LayerKind::kPool ||
                         out.kind == LayerKind::kConcat || out.kind == LayerKind::kHead;
    t.per_flight = received + kept + (last + 1 < seq.size() && !counted ? out.out_elements * kFloatBytes : 0);
    t.received = received;
    t.current = work;
  } else {
    t.fixed += work;
  }
  return t;
}

Partition from_sizes(std::vector<int> sizes, const StageCost& cost) {
  Partition p;
  p.sizes = std::move(sizes);
  const int k = p.stages();
  for (int s = 0, first = 0; s < k; first += p.sizes[s], ++s) {
    p.stage_costs.push_back(cost(first, first + p.sizes[s] - 1, k - s));
    p.max_cost = std::max(p.max_cost, p.stage_costs.back());
  }
  return p;
}

}  // namespace

std::string to_string(BalanceStrategy s) {
  switch (s) {
    case BalanceStrategy::kNaive: return "naive";
    case BalanceStrategy::kMemory: return "memory";
    case BalanceStrategy::kTime: return "time";
  }
  return "?";
}

BalanceStrategy parse_balance_strategy(const std::string& s) {
  if (s == "naive") return BalanceStrategy::kNaive;
  if (s == "memory") return BalanceStrategy::kMemory;
  if (s == "time") return BalanceStrategy::kTime;
  throw Error("balance: '" + s + "' is not one of naive, memory, time");
}

std::string to_string(PipelineScheduleKind s) { return s == PipelineScheduleKind::kGPipe ? "gpipe" : "1f1b"; }

PipelineScheduleKind parse_pipeline_schedule(const std::string& s) {
  if (s == "gpipe") return PipelineScheduleKind::kGPipe;
  if (s == "1f1b") return PipelineScheduleKind::kOneFOneB;
  throw Error("schedule: '" + s + "' is not one of gpipe, 1f1b");
}

std::string to_string(ActivationCheckpoint c) {
  switch (c) {
    case ActivationCheckpoint::kNever: return "never";
    case ActivationCheckpoint::kAlways: return "always";
    case ActivationCheckpoint::kExceptLast: return "except_last";
  }
  return "?";
}

ActivationCheckpoint parse_activation_checkpoint(const std::string& s) {
  if (s == "never") return ActivationCheckpoint::kNever;
  if (s == "always") return ActivationCheckpoint::kAlways;
  if (s == "except_last") return ActivationCheckpoint::kExceptLast;
  throw Error("activation_checkpoint: '" + s + "' is not one of never, always, except_last");
}

int Partition::first(int stage) const {
  TESSERA_CHECK(stage >= 0 && stage < stages());
  int f = 0;
  for (int s = 0; s < stage; ++s) f += sizes[s];
  return f;
}

Partition balance_naive(int layers, int stages) {
  check_stages(layers, stages);
  Partition p;
  for (int s = 0; s < stages; ++s) p.sizes.push_back(layers / stages + (s < layers % stages ? 1 : 0));
  return p;
}

std::vector<Partition> min_max_partitions(int n, int k_max, const StageCost& cost) {
  check_stages(n, k_max);
  // g[k][i]: least max cost of layers i … n−1 in k stages, the first of which is the k-th
  // from the end; end[k][i]: where that first stage ends. Needs n − i >= k.
  std::vector<std::vector<double>> g(k_max + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> end(k_max + 1, std::vector<int>(n + 1, -1));
  g[0][n] = 0;
  for (int k = 1; k <= k_max; ++k)
    for (int i = n - k; i >= 0; --i)
      for (int j = i; j <= n - k; ++j) {
        if (g[k - 1][j + 1] == kInf) continue;
        const double c = std::max(cost(i, j, k), g[k - 1][j + 1]);
        if (c < g[k][i]) {
          g[k][i] = c;
          end[k][i] = j;
        }
      }
  std::vector<Partition> out;
  for (int k = 1; k <= k_max; ++k) {
    std::vector<int> sizes;
    for (int i = 0, r = k; r > 0; --r) {
      const int j = end[r][i];
      TESSERA_CHECK(j >= i);
      sizes.push_back(j - i + 1);
      i = j + 1;
    }
    out.push_back(from_sizes(std::move(sizes), cost));
  }
  return out;
}

Partition min_max_partition(int layers, int stages, const StageCost& cost) {
  check_stages(layers, stages);
  return std::move(min_max_partitions(layers, stages, cost).back());
}

Partition balance_by_time(const std::vector<double>& layer_seconds, int stages) {
  const int n = static_cast<int>(layer_seconds.size());
  check_stages(n, stages);
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + layer_seconds[i];
  return min_max_partition(n, stages, [&](int f, int l, int) { return prefix[l + 1] - prefix[f]; });
}

std::vector<int64_t> LayerMemoryCalibration::extra_bytes(const LayerSequence& seq) const {
  if (constant_bytes.size() != size_t(seq.size()) || bytes_per_element.size() != size_t(seq.size()))
    throw Error(fmt::format("calibration: {} layers measured, the model has {} (recalibrate: tessera plan --calibrate)",
                            constant_bytes.size(), seq.size()));
  std::vector<int64_t> out;
  for (int i = 0; i < seq.size(); ++i) {
    const Layer& l = seq.layers[size_t(i)];
    const double e = constant_bytes[size_t(i)] + bytes_per_element[size_t(i)] * double(l.in_elements + l.out_elements);
    out.push_back(std::max<int64_t>(0, std::llround(e)));
  }
  return out;
}

LayerMemoryCalibration LayerMemoryCalibration::fit(const LayerSequence& a, const std::vector<int64_t>& extra_a,
                                                   const LayerSequence& b, const std::vector<int64_t>& extra_b) {
  const size_t n = a.layers.size();
  if (b.layers.size() != n || extra_a.size() != n || extra_b.size() != n)
    throw Error(fmt::format("calibration: layer counts differ ({}, {}, {} and {} measurements)", n, b.layers.size(),
                            extra_a.size(), extra_b.size()));
  LayerMemoryCalibration c;
  for (size_t i = 0; i < n; ++i) {
    const double xa = double(a.layers[i].in_elements + a.layers[i].out_elements);
    const double xb = double(b.layers[i].in_elements + b.layers[i].out_elements);
    if (xa == xb)
      throw Error("calibration: layer " + a.layers[i].name + " has the same size at both sides; use two different sides");
    const double slope = double(extra_b[i] - extra_a[i]) / (xb - xa);
    c.bytes_per_element.push_back(slope);
    c.constant_bytes.push_back(double(extra_a[i]) - slope * xa);
  }
  return c;
}

namespace {
double work_units(const Layer& l) { return l.flops > 0 ? l.flops : double(l.in_elements + l.out_elements); }
}  // namespace

std::vector<double> LayerTimeCalibration::seconds(const LayerSequence& seq) const {
  if (seconds_per_unit.size() != size_t(seq.size()))
    throw Error(fmt::format("calibration: {} layer times measured, the model has {} layers (recalibrate: tessera plan "
                            "--calibrate)",
                            seconds_per_unit.size(), seq.size()));
  std::vector<double> out;
  for (int i = 0; i < seq.size(); ++i) out.push_back(seconds_per_unit[size_t(i)] * work_units(seq.layers[size_t(i)]));
  return out;
}

LayerTimeCalibration LayerTimeCalibration::fit(const LayerSequence& seq, const std::vector<double>& seconds) {
  if (seconds.size() != size_t(seq.size()))
    throw Error(fmt::format("calibration: {} layer times for {} layers", seconds.size(), seq.size()));
  LayerTimeCalibration c;
  for (int i = 0; i < seq.size(); ++i) c.seconds_per_unit.push_back(seconds[size_t(i)] / work_units(seq.layers[size_t(i)]));
  return c;
}

int StageMemoryOptions::in_flight(int from_end) const {
  if (!training) return 1;
  return schedule == PipelineScheduleKind::kGPipe ? micro_batches : std::min(micro_batches, from_end);
}

int64_t stage_bytes(const LayerSequence& seq, int first, int last, int from_end, const StageMemoryOptions& o) {
  return stage_terms(seq, first, last, o.training, o.extra_bytes).bytes(o.in_flight(from_end), o.checkpoint);
}

namespace {

// The layer sequence of a tile whose input side differs per axis (unet_layer_sequence is
// for cubes): the same layers, each element count the product of its per-axis sides.
LayerSequence box_layer_sequence(const UNetOptions& model, const Index& input_sides) {
  std::vector<LayerSequence> axes;
  for (int64_t s : input_sides) axes.push_back(unet_layer_sequence(model, s));
  auto volume = [&](auto side) {
    int64_t v = 1;
    for (const auto& a : axes) v *= side(a);
    return v;
  };
  LayerSequence seq = axes.front();
  for (size_t i = 0; i < seq.layers.size(); ++i) {
    Layer& l = seq.layers[i];
    l.in_elements = l.in_channels * volume([&](const LayerSequence& a) { return a.layers[i].in_side; });
    l.out_elements = l.out_channels * volume([&](const LayerSequence& a) { return a.layers[i].out_side; });
    // What a layer keeps is a whole number of bytes per output element (4, 12 or 0).
    const Layer& cube = axes.front().layers[i];
    l.saved_bytes = cube.out_elements > 0 ? cube.saved_bytes / cube.out_elements * l.out_elements : 0;
  }
  for (SkipEdge& e : seq.skips) {
    e.elements = seq.layers[size_t(e.producer)].out_elements;
    e.cropped_elements = seq.layers[size_t(e.producer)].out_channels *
                         volume([&](const LayerSequence& a) { return a.layers[size_t(e.consumer)].out_side; });
  }
  return seq;
}

}  // namespace

int64_t inference_bytes(const UNetOptions& model, const Index& steps, int batch) {
  TESSERA_CHECK(batch >= 1 && static_cast<int>(steps.size()) == model.dims);
  Index sides;
  for (int64_t s : steps) sides.push_back(s + unet_remainder(model) + 2 * unet_halo(model));
  const LayerSequence seq = box_layer_sequence(model, sides);
  const int64_t weights = kFloatBytes * seq.parameter_count();
  const int64_t network = stage_bytes(seq, 0, seq.size() - 1, 1, StageMemoryOptions{}.with_training(false)) - weights;
  const Layer& first = seq.layers.front();
  const int64_t window = first.in_elements * kFloatBytes + first.in_elements / first.in_channels;  // values + valid
  const int64_t loop = 2 * window + 2 * first.in_elements * kFloatBytes + seq.layers.back().out_elements * kFloatBytes;
  return weights + std::llround(kInferenceAllocatorSlack * double(batch) * double(network + loop));
}

void SpatialPlanOptions::validate() const {
  auto bad = [](const std::string& field, const std::string& why) { throw Error("spatial plan: " + field + ": " + why); };
  if (micro_batch < 1) bad("micro_batch", "must be >= 1, got " + std::to_string(micro_batch));
  if (!(latency_seconds >= 0)) bad("latency_seconds", "must be >= 0");
  if (!(bytes_per_second > 0)) bad("bytes_per_second", "must be > 0");
}

namespace {

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// `block` per axis at layer `l` of `seq`: blocks start on multiples of 2^(L−1), so a layer at
// side in_side sees the block scaled by in_side / input_side exactly.
std::vector<int64_t> layer_block(const LayerSequence& seq, const Layer& l, const std::vector<int64_t>& block) {
  std::vector<int64_t> out;
  for (int64_t e : block) out.push_back(e * l.in_side / seq.input_side);
  return out;
}

bool has_halo(const LayerSequence& seq, const Layer& l) { return l.kind == LayerKind::kConv && seq.options.kernel > 1; }

// What the decomposed layers keep beyond the one-process ones (spatial_plan's contract),
// applied to the layer sequence `block` of the largest block (`sides` per axis) of `seq`:
// a K > 1 convolution keeps its unpadded input, as one process does, plus the halo slabs it
// received (two per split axis, an interior block's worst case), from which backward
// rebuilds the padded input.
void add_decomposition_terms(const LayerSequence& seq, const std::vector<int>& parts, const std::vector<int64_t>& sides,
                             LayerSequence& block) {
  const int64_t width = (seq.options.kernel - 1) / 2;
  for (size_t i = 0; i < block.layers.size(); ++i) {
    if (!has_halo(seq, seq.layers[i])) continue;
    std::vector<int64_t> extent = layer_block(seq, seq.layers[i], sides);
    int64_t slabs = 0;
    for (size_t a = 0; a < extent.size(); ++a) {
      if (parts[a] > 1) {
        std::vector<int64_t> slab = extent;
        slab[a] = width;
        slabs += 2 * product(slab);
      }
      extent[a] += 2 * width;  // later axes' slabs include this axis' halos
    }
    block.layers[i].saved_bytes += block.layers[i].in_channels * slabs * kFloatBytes;
  }
}

// Neighbours of mesh coordinate `coords` summed over the split axes: messages per exchange.
int messages_per_exchange(const std::vector<int>& parts, const std::vector<int>& coords) {
  int m = 0;
  for (size_t a = 0; a < parts.size(); ++a)
    if (parts[a] > 1) m += (coords[a] > 0) + (coords[a] < parts[a] - 1);
  return m;
}

}  // namespace

SpatialPlan spatial_plan(const LayerSequence& seq, const std::vector<int>& parts, const SpatialPlanOptions& o) {
  o.validate();
  const UNetOptions& model = seq.options;
  if (model.padding != Padding::kSame)
    throw Error("spatial: a `valid` network cannot be split across ranks: use --padding same");
  if (static_cast<int>(parts.size()) != model.dims)
    throw Error(fmt::format("spatial: a mesh of {} axes for a {}-D model", parts.size(), model.dims));
  const SpatialMesh mesh{parts};
  std::vector<std::vector<int64_t>> offsets;
  SpatialPlan p;
  p.parts = parts;
  for (int a = 0; a < model.dims; ++a) {
    offsets.push_back(block_offsets(seq.input_side, parts[size_t(a)], unet_alignment(model),
                                    "spatial axis " + std::to_string(a)));
    p.largest_block.push_back(offsets.back()[1] - offsets.back()[0]);  // the first blocks are the larger
  }
  // Memory: the layer model on the largest block, with what decomposition changes.
  LayerSequence block = box_layer_sequence(model, p.largest_block);
  add_decomposition_terms(seq, parts, p.largest_block, block);
  for (const Layer& l : seq.layers) p.state_bytes += layer_bytes(l, 0, o.training);  // activations: none at 0 samples
  const auto mo = StageMemoryOptions{}.with_training(o.training);
  const int64_t one_sample = stage_bytes(block, 0, block.size() - 1, 1, mo) - p.state_bytes;
  p.activation_bytes = one_sample * o.micro_batch;
  p.bytes = p.state_bytes + p.activation_bytes;
  // Halo bytes and time, rank by rank (edge blocks have fewer neighbours, uneven blocks differ).
  const int passes = o.training ? 2 : 1;  // backward sends the same amount back
  const int64_t width = (model.kernel - 1) / 2;
  p.layer_halo_bytes.assign(seq.layers.size(), 0);
  p.rank_halo_bytes.assign(size_t(mesh.size()), 0);
  // The first convolution's input is the network input, which needs no gradient: autograd
  // runs no backward exchange for it.
  auto passes_of = [&](size_t i) { return i == 0 ? 1 : passes; };
  for (size_t i = 0; i < seq.layers.size(); ++i) p.exchanges += has_halo(seq, seq.layers[i]) ? passes_of(i) : 0;
  for (int r = 0; r < mesh.size(); ++r) {
    const std::vector<int> coords = mesh.coordinates(r);
    std::vector<int64_t> extent;
    for (int a = 0; a < model.dims; ++a) extent.push_back(offsets[size_t(a)][coords[size_t(a)] + 1] - offsets[size_t(a)][coords[size_t(a)]]);
    for (size_t i = 0; i < seq.layers.size(); ++i) {
      const Layer& l = seq.layers[i];
      if (!has_halo(seq, l)) continue;
      const int64_t bytes = passes_of(i) * halo_send_bytes(mesh, coords, layer_block(seq, l, extent),
                                                     int64_t(o.micro_batch) * l.in_channels, width, kFloatBytes);
      p.layer_halo_bytes[i] += bytes;
      p.rank_halo_bytes[size_t(r)] += bytes;
    }
    p.halo_bytes += p.rank_halo_bytes[size_t(r)];
    const double seconds = double(p.exchanges * messages_per_exchange(parts, coords)) * o.latency_seconds +
                           double(p.rank_halo_bytes[size_t(r)]) / o.bytes_per_second;
    p.halo_seconds = std::max(p.halo_seconds, seconds);
  }
  return p;
}

std::vector<std::vector<int>> spatial_meshes(int ranks, int dims) {
  TESSERA_CHECK(ranks >= 1 && dims >= 1);
  std::vector<std::vector<int>> out;
  std::vector<int> split(size_t(dims), 1);
  split[0] = ranks;
  out.push_back(split);
  // Prime factors, largest first, each to the axis with the fewest blocks so far.
  std::vector<int> primes;
  for (int n = ranks, f = 2; n > 1; f = (n % f == 0) ? f : f + 1)
    if (n % f == 0) {
      primes.push_back(f);
      n /= f;
    }
  std::vector<int> cubic(size_t(dims), 1);
  for (auto it = primes.rbegin(); it != primes.rend(); ++it) *std::min_element(cubic.begin(), cubic.end()) *= *it;
  std::sort(cubic.rbegin(), cubic.rend());
  if (cubic != split) out.push_back(cubic);
  return out;
}

Partition balance_by_memory(const LayerSequence& seq, int stages, const StageMemoryOptions& o) {
  return min_max_partition(seq.size(), stages,
                           [&](int f, int l, int e) { return double(stage_bytes(seq, f, l, e, o)); });
}

Partition balance(BalanceStrategy strategy, const LayerSequence& seq, int stages, const StageMemoryOptions& o,
                  const std::vector<double>& layer_seconds) {
  switch (strategy) {
    case BalanceStrategy::kNaive: {
      Partition p = balance_naive(seq.size(), stages);
      return from_sizes(p.sizes, [&](int f, int l, int e) { return double(stage_bytes(seq, f, l, e, o)); });
    }
    case BalanceStrategy::kMemory: return balance_by_memory(seq, stages, o);
    case BalanceStrategy::kTime:
      if (static_cast<int>(layer_seconds.size()) != seq.size())
        throw Error("balance: time strategy needs one time per layer (" + std::to_string(seq.size()) + "), got " +
                    std::to_string(layer_seconds.size()));
      return balance_by_time(layer_seconds, stages);
  }
  throw Error("balance: unknown strategy");
}

std::vector<double> predicted_layer_seconds(const LayerSequence& seq, double device_flops,
                                            double memory_bytes_per_second, bool training) {
  std::vector<double> t;
  for (const auto& l : seq.layers)
    t.push_back((l.flops / device_flops +
                 double((l.in_elements + l.out_elements) * kFloatBytes) / memory_bytes_per_second) *
                (training ? 3.0 : 1.0));
  return t;
}

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

namespace {

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

// ---- plan(): candidates, their memory, their cost, the choice and its reasons ----------

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

// What one tile inset T costs whatever M, K and checkpointing are: the network at T's input
// side, the memory terms of every stage [first, last], and prefix sums of the per-layer
// seconds and parameters, so a stage's time and allreduce volume are two lookups.
struct TileModel {
  int64_t inset = 0;  // T
  LayerSequence seq;
  int layers = 0;
  int k_max = 0;                      // K searched in 1 … k_max
  int64_t tiles = 0;                  // per pass over the image
  std::vector<StageTerms> terms;      // stage [first, last] at first · layers + last
  std::vector<double> seconds_prefix;  // Σ seconds of layers 0 … i − 1
  std::vector<int64_t> param_prefix;   // Σ parameters of layers 0 … i − 1

  const StageTerms& stage(int first, int last) const { return terms[size_t(first) * layers + last]; }
  double seconds(int first, int size) const { return seconds_prefix[first + size] - seconds_prefix[first]; }
  int64_t params(int first, int size) const { return param_prefix[first + size] - param_prefix[first]; }
};

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

// One layout that fits: indices into the searched values and its predictions.
struct Candidate {
  int t = -1, m = 0, k = 0;  // indices: tile candidate, micro-batches value, stages
  double pass = kInf, step = 0, max_stage_seconds = 0;
  int dp = 0;
  int64_t steps = 0, peak = 0, tiles = 0;
  Partition memory;  // stage costs in bytes, baseline included
  std::vector<double> stage_seconds;
};

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

// What the search found with one checkpointing mode.
struct ModeResult {
  // max_cost[t][m][K − 1]: the memory-balanced largest stage (bytes, baseline included);
  // empty where the tile was not searched or M exceeds the tiles.
  std::vector<std::vector<std::vector<double>>> max_cost;
  Candidate best;  // the fastest layout that fits (t < 0: none)
};

struct Search {
  std::vector<int64_t> sides;  // tile insets T
  std::vector<int> micro;      // M values
  std::vector<ActivationCheckpoint> modes;
  std::vector<ModeResult> by_mode;  // one per mode
  double least_memory = kInf;       // over every candidate, fitting or not
  std::string least_memory_at;

  void note_memory(double bytes, int64_t T, int K, int M, ActivationCheckpoint ck) {
    if (bytes >= least_memory) return;
    least_memory = bytes;
    least_memory_at = fmt::format("T = {}, K = {}, M = {}, activation checkpointing {}", T, K, M, to_string(ck));
  }
};

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

}  // namespace

namespace {

// ---- spatial parallelism: one tile over sp ranks (K = 1) ---------------------------------

struct SpatialCandidate {
  int64_t inset = 0;
  SpatialPlan plan;
  int sp = 0, dp = 0;
  int64_t tiles = 0, steps = 0, peak = 0;
  double tile_seconds = 0, step = 0, pass = kInf;
};

// sp = 2 … devices over every mesh of spatial_meshes() at every tile candidate: the fastest
// layout that fits (better()'s order), and the least memory any split needs.
struct SpatialSearch {
  SpatialCandidate best;
  double least_memory = kInf;
  std::string least_memory_at;
};

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

std::string mesh_text(const std::vector<int>& parts) {
  std::string t;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) t += (t.empty() ? "" : " × ") + std::to_string(*it);
  return t;
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

}  // namespace

Layout plan(const PlanOptions& o) {
  o.validate();
  Search s = search(o);
  const size_t chosen = choose_mode(s);
  const SpatialSearch sp = search_spatial(o, s);
  if (sp.least_memory < s.least_memory) std::tie(s.least_memory, s.least_memory_at) = std::tie(sp.least_memory, sp.least_memory_at);
  const Candidate& pipeline = s.by_mode[chosen].best;
  const bool pipeline_fits = pipeline.t >= 0;
  const bool spatial_wins =
      sp.best.sp > 0 && (!pipeline_fits || sp.best.pass < pipeline.pass ||
                         (sp.best.pass == pipeline.pass && sp.best.dp * sp.best.sp < pipeline.dp * pipeline.k));
  if (!pipeline_fits && !spatial_wins) throw nothing_fits(o, s);
  if (spatial_wins) {
    Layout L = spatial_layout(o, sp.best);
    L.reasons.push_back(fmt::format("memory: each rank needs {:.2f} GiB of {:.2f} GiB ({:.0f}%): the parameters, "
                                    "gradients and optimiser state whole, the activations of its block",
                                    gib(double(L.peak_memory_bytes)), gib(double(o.device_memory_bytes)),
                                    100.0 * double(L.peak_memory_bytes) / double(o.device_memory_bytes)));
    L.reasons.push_back(explain_spatial(o, sp, L, true, pipeline_fits ? pipeline.pass : kInf));
    L.reasons.push_back(fmt::format("time: {:.3g} s per pass at {:.3g} GFLOP/s per device", L.pass_seconds,
                                    o.device_flops / 1e9));
    return L;
  }
  Layout L = layout_of(o, s, chosen);
  explain_memory(o, s, chosen, L, L.reasons);
  explain_parallelism(o, s, chosen, L, L.reasons);
  L.reasons.push_back(explain_spatial(o, sp, L, false, L.pass_seconds));
  explain_checkpoint_and_time(o, s, chosen, L, L.reasons);
  return L;
}

}  // namespace tessera::parallel
