#pragma once
// What spatial parallelism costs one step (parallel/modes/spatial.hpp runs it): memory per
// rank, halo bytes and halo time, for a tile split over a mesh of ranks. Torch-free.
#include <cstdint>
#include <vector>

#include "tessera/core/layer_sequence.hpp"

namespace tessera::parallel {

/// Spatial parallelism of one tile (parallel/spatial.hpp): the network's input split into
/// blocks, `parts[a]` along spatial axis a, one block per rank, every rank running the whole
/// network on its block. Model of what one step costs each rank:
///   memory (training): parameters, gradients and Adam's moments replicated (16 B per
///     parameter) + stage_bytes() of the network on the LARGEST block (its layer sequence,
///     per-axis sides), changed where the decomposed layers keep other tensors than the
///     one-process ones (unet_blocks.cpp under a DecompositionScope):
///       - every K > 1 convolution keeps its halo-padded input (block + (K − 1)/2 on both
///         sides of every axis) for backward; when its input is a pooling's or a
///         concatenation's output, which nothing else keeps, that copy replaces it, after a
///         ReLU (which keeps its result) or the network input it comes in addition;
///       - a normalisation keeps two tensors of its input's size (the centred input and the
///         normalised one: statistics over the whole image are summed across ranks, so it is
///         composed of differentiable steps) instead of its input;
///       - beside a K > 1 convolution's backward (the micro-batch's worst layer may be one),
///         the copies its halo exchange makes: the rebuilt padded input, its gradient and the
///         adjoint's intermediate without the later axes' halos (the first convolution: the
///         padded input only). Measured (tests/parallel/spatial_memory_test.cpp): live
///         tensors at a step's peak within 3 % of this model at P = 1, 2, 4.
///     Inference: the weights + the block's largest working set.
///   halo bytes: per K > 1 convolution, what halo_send_bytes() gives for that rank's block of
///     the layer's input (block extents scale with the layer's side: blocks start on
///     multiples of 2^(L−1)), its input channels × `micro_batch` samples, width (K − 1)/2,
///     float32; backward sends the same again (training), except for the first convolution,
///     whose input (the network's) needs no gradient.
///   halo time: α-β for the busiest rank, one message per neighbour, axis and exchange.
/// `same` padding only (a `valid` network cannot be split: tessera::Error naming --padding same).
struct SpatialPlanOptions {
  int micro_batch = 1;                  ///< samples per forward (N)
  bool training = true;
  double latency_seconds = 20e-6;       ///< α per message
  double bytes_per_second = 1e9;        ///< β: point-to-point bandwidth between neighbours

  SpatialPlanOptions& with_micro_batch(int n) { micro_batch = n; return *this; }
  SpatialPlanOptions& with_training(bool t) { training = t; return *this; }
  SpatialPlanOptions& with_latency_seconds(double s) { latency_seconds = s; return *this; }
  SpatialPlanOptions& with_bytes_per_second(double b) { bytes_per_second = b; return *this; }
  /// Throws tessera::Error naming the first bad field.
  void validate() const;
};

struct SpatialPlan {
  std::vector<int> parts;                 ///< blocks per spatial axis (the mesh)
  std::vector<int64_t> largest_block;     ///< input extent per axis of the largest block
  int64_t state_bytes = 0;                ///< replicated: parameters (+ gradients + Adam moments)
  int64_t activation_bytes = 0;           ///< the largest block's share, decomposition terms included
  int64_t bytes = 0;                      ///< per rank: state + activations (baseline excluded)
  std::vector<int64_t> layer_halo_bytes;  ///< per layer: bytes all ranks send in one step (0: no exchange)
  std::vector<int64_t> rank_halo_bytes;   ///< per spatial rank: bytes it sends in one step
  int64_t halo_bytes = 0;                 ///< Σ over ranks and layers per step
  int exchanges = 0;                      ///< halo exchanges per step (forward + backward)
  double halo_seconds = 0;                ///< α-β time of the busiest rank's exchanges per step
};

/// The spatial model above for the network `seq` (its input side is the whole tile's, a
/// cube) split by `parts` (one entry per spatial axis). Throws tessera::Error when the
/// model is `valid`, or when a side cannot be split into `parts` blocks aligned to 2^(L−1)
/// (the message of block_offsets(), naming the axis).
SpatialPlan spatial_plan(const LayerSequence& seq, const std::vector<int>& parts, const SpatialPlanOptions& o = {});

/// The meshes `spatial_plan` is asked about for P ranks in `dims` axes: the 1-D split
/// {P, 1, …} and, when P factors, the most nearly cubic one (2 × 2 for 4, 2 × 2 × 2 for 8).
std::vector<std::vector<int>> spatial_meshes(int ranks, int dims);

}  // namespace tessera::parallel
