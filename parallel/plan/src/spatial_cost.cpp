#include "tessera/parallel/plan/spatial_cost.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "tessera/core/error.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/core/spatial_mesh.hpp"

namespace tessera::parallel {
namespace {

constexpr int64_t kFloatBytes = 4;

}  // namespace

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
// rebuilds the padded input. Returns, per layer, the transient tensors of its backward
// (HaloConvolutionFunction, spatial.cpp) beside the one-process model's input and output
// gradients: the rebuilt padded input, its gradient (padded) and the halo adjoint's
// intermediate copies, one per axis after the first (the last copy is the input gradient,
// which the model counts); the first convolution computes no input gradient.
std::vector<int64_t> add_decomposition_terms(const LayerSequence& seq, const std::vector<int>& parts,
                                             const std::vector<int64_t>& sides, LayerSequence& block) {
  const int64_t width = (seq.options.kernel - 1) / 2;
  std::vector<int64_t> transient(block.layers.size(), 0);
  if (std::all_of(parts.begin(), parts.end(), [](int n) { return n == 1; })) return transient;  // one process
  for (size_t i = 0; i < block.layers.size(); ++i) {
    if (!has_halo(seq, seq.layers[i])) continue;
    std::vector<int64_t> extent = layer_block(seq, seq.layers[i], sides);
    const std::vector<int64_t> unpadded = extent;
    int64_t slabs = 0;
    for (size_t a = 0; a < extent.size(); ++a) {
      if (parts[a] > 1) {
        std::vector<int64_t> slab = extent;
        slab[a] = width;
        slabs += 2 * product(slab);
      }
      extent[a] += 2 * width;  // later axes' slabs include this axis' halos
    }
    const int64_t channels = block.layers[i].in_channels;
    block.layers[i].saved_bytes += channels * slabs * kFloatBytes;
    int64_t copies = product(extent) * (i == 0 ? 1 : 2);  // rebuilt padded input (+ its gradient)
    for (size_t a = 1; i > 0 && a < extent.size(); ++a) {  // the adjoint strips the last axes' halos first
      std::vector<int64_t> inner = extent;
      for (size_t b = a; b < extent.size(); ++b) inner[b] = unpadded[b];
      copies += product(inner);
    }
    transient[i] = channels * copies * kFloatBytes;
  }
  return transient;
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
  std::vector<int64_t> transient = add_decomposition_terms(seq, parts, p.largest_block, block);
  for (const Layer& l : seq.layers) p.state_bytes += layer_bytes(l, 0, o.training);  // activations: none at 0 samples
  auto mo = StageMemoryOptions{}.with_training(o.training);
  if (o.training) mo.with_extra_bytes(std::move(transient));
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

}  // namespace tessera::parallel
