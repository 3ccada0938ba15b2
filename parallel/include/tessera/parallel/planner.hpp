#pragma once
// Balancing a layer sequence (core/layer_sequence.hpp) over K pipeline stages, and the
// planner that picks a whole layout — tile inset T, q × q (× q) tiling, stages K with their
// balance, micro-batches M, data-parallel degree — from a model of memory and time.
// Torch-free: plain arithmetic on LayerSequence; thread safe (no shared state).
//
// Stages hold consecutive layers [first, last]; a balance lists the layers per stage, e.g.
// {14, 24, 30, 22, 12, 7}. Every stage is non-empty. Micro-batches carry one tile each.
//
// Stage memory model (bytes, one device), see stage_bytes():
//   training:  16 B per parameter of the stage's layers (weights, gradients, Adam's two moments)
//              + (in flight − 1) micro-batches held whole: the received activation (the
//                network input for stage 0), every skip tensor received from an earlier stage
//                (cropped to what the concatenation consumes; skips go directly producer →
//                consumer, so stages in between hold nothing), both held until their gradient
//                is sent back, everything autograd keeps for the stage's layers, and the
//                output sent on when no layer of this stage keeps it (a convolution's, norm's
//                or up-sampling's: the sender holds it until that micro-batch's backward)
//              + the micro-batch being computed, at its worst layer x: the received tensors,
//                what layers first … x keep (later layers have not run yet in the forward and
//                are freed already in the backward), x's input + output (or their gradients)
//                and, when calibrated, x's measured extra (LayerMemoryCalibration).
//              Micro-batches in flight: M for GPipe, min(M, K − s) for 1F1B stage s (0-based).
//              With activation checkpointing the whole micro-batches hold their received
//              tensors only (`always`), or all but one of them do (`except_last`).
//   inference: 4 B per parameter + max over the stage's layers of (input + output + skip
//              tensors the stage holds at that layer).
// Plus a fixed per-process baseline (LibTorch, MPI buffers) in the planner.
// The cost of a stage depends only on its layers and its position from the end, so the DP
// below is exact for it.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/geometry.hpp"
#include "tessera/core/layer_sequence.hpp"

namespace tessera::parallel {

enum class BalanceStrategy { kNaive, kMemory, kTime };
std::string to_string(BalanceStrategy s);
BalanceStrategy parse_balance_strategy(const std::string& s);  ///< naive, memory, time

enum class PipelineScheduleKind { kGPipe, kOneFOneB };
std::string to_string(PipelineScheduleKind s);                  ///< gpipe, 1f1b
PipelineScheduleKind parse_pipeline_schedule(const std::string& s);

/// Activation checkpointing of pipeline micro-batches: `never` keeps every in-flight
/// micro-batch's activations; `always` keeps only each micro-batch's received tensors and
/// recomputes its forward just before its backward; `except_last` does so for all but the
/// last micro-batch (whose backward, under GPipe, comes first and would recompute at once).
enum class ActivationCheckpoint { kNever, kAlways, kExceptLast };
std::string to_string(ActivationCheckpoint c);                  ///< never, always, except_last
ActivationCheckpoint parse_activation_checkpoint(const std::string& s);

/// K consecutive non-empty stages over n layers and the cost each one has.
struct Partition {
  std::vector<int> sizes;           ///< layers per stage (the balance); Σ = n, each >= 1
  std::vector<double> stage_costs;  ///< cost of each stage under the model used
  double max_cost = 0;              ///< max of stage_costs

  int stages() const { return static_cast<int>(sizes.size()); }
  int first(int stage) const;  ///< index of the stage's first layer
};

/// Cost of one stage holding layers [first, last] (inclusive, 0-based) that is the
/// `from_end`-th stage counted from the last one (1 = last stage). 1F1B memory depends on it.
using StageCost = std::function<double(int first, int last, int from_end)>;

/// Equal layer counts; the first n mod K stages get one layer more. Costs are left empty.
/// Throws tessera::Error naming `stages` unless 1 <= stages <= layers.
Partition balance_naive(int layers, int stages);

/// The exact min-max partition: minimises the largest stage cost over every split of
/// `layers` into `stages` consecutive non-empty stages (dynamic programming, O(K n²) cost
/// calls). Ties go to the split whose first stage ends earliest. Throws like balance_naive.
Partition min_max_partition(int layers, int stages, const StageCost& cost);

/// The same DP for every K = 1 … k_max at once (element K − 1); k_max <= layers.
std::vector<Partition> min_max_partitions(int layers, int k_max, const StageCost& cost);

/// Min-max over measured (or predicted) per-layer times; stage time is their sum.
Partition balance_by_time(const std::vector<double>& layer_seconds, int stages);

/// What the stage model leaves out, measured on this machine by `tessera plan --calibrate`
/// (parallel/memory_calibration.hpp): per layer, the peak bytes of its forward + backward on
/// one tile beyond the model's prediction for a stage of that layer alone — LibTorch's and
/// oneDNN's reordered copies of weights and activations, convolution workspaces, the loss's
/// temporaries. Measured at two tile sides and fitted per layer as
///   extra = constant_bytes + bytes_per_element × (in + out elements per sample),
/// so it applies to any tile side of the same model. Training only.
struct LayerMemoryCalibration {
  std::vector<double> constant_bytes;     ///< one per layer
  std::vector<double> bytes_per_element;  ///< one per layer

  bool empty() const { return constant_bytes.empty(); }
  /// Each layer's extra bytes for `seq` (same model, any side), clamped at >= 0. Throws
  /// tessera::Error naming `calibration` when the layer counts differ.
  std::vector<int64_t> extra_bytes(const LayerSequence& seq) const;
  /// The per-layer line through the extras measured at two sides, `a` and `b`, of one model
  /// (one entry per layer each). Throws tessera::Error naming `calibration` when the
  /// sequences differ in layers or a layer has the same size in both.
  static LayerMemoryCalibration fit(const LayerSequence& a, const std::vector<int64_t>& extra_a, const LayerSequence& b,
                                    const std::vector<int64_t>& extra_b);
};

/// Measured forward + backward seconds per layer (`tessera plan --calibrate`), kept as
/// seconds per unit of work — FLOPs for convolutions, input + output elements for the
/// element-wise layers — so they apply at any tile side of the same model.
struct LayerTimeCalibration {
  std::vector<double> seconds_per_unit;  ///< one per layer

  bool empty() const { return seconds_per_unit.empty(); }
  /// Each layer's training seconds (forward + backward, one tile) for `seq`. Throws
  /// tessera::Error naming `calibration` when the layer counts differ.
  std::vector<double> seconds(const LayerSequence& seq) const;
  /// From seconds measured at `seq`'s side (one per layer).
  static LayerTimeCalibration fit(const LayerSequence& seq, const std::vector<double>& seconds);
};

struct StageMemoryOptions {
  int micro_batches = 1;  ///< M
  PipelineScheduleKind schedule = PipelineScheduleKind::kOneFOneB;
  bool training = true;
  std::vector<int64_t> extra_bytes;  ///< per layer of the sequence: calibrated extra (empty: none)
  ActivationCheckpoint checkpoint = ActivationCheckpoint::kNever;

  StageMemoryOptions& with_micro_batches(int m) { micro_batches = m; return *this; }
  StageMemoryOptions& with_schedule(PipelineScheduleKind s) { schedule = s; return *this; }
  StageMemoryOptions& with_training(bool t) { training = t; return *this; }
  StageMemoryOptions& with_extra_bytes(std::vector<int64_t> e) { extra_bytes = std::move(e); return *this; }
  StageMemoryOptions& with_checkpoint(ActivationCheckpoint c) { checkpoint = c; return *this; }
  /// Micro-batches whose activations a stage holds at once.
  int in_flight(int from_end) const;
};

/// Predicted peak bytes of the stage holding layers [first, last] (model in the header
/// comment), excluding the per-process baseline.
int64_t stage_bytes(const LayerSequence& seq, int first, int last, int from_end, const StageMemoryOptions& o);

/// Forward-only tiled inference of the whole network in one process (core/inference.hpp, no
/// autograd): predicted peak bytes, per-process baseline excluded, for `batch` tiles of inset
/// `steps` per axis (a tile clamped to a thin image is no cube; each axis reads step + r + 2ε).
/// The network's share is stage_bytes()' inference model for one stage holding every layer
/// (weights + per tile the largest working set: a layer's input and output and the skips
/// alive at it); beside it the tiled loop holds the input windows of this batch and of the
/// next (read ahead), their stacked and channels-last copies, and the logits it hands on.
/// Those tensors are multiplied by kInferenceAllocatorSlack. Throws tessera::Error when the
/// network cannot take a side.
int64_t inference_bytes(const UNetOptions& model, const Index& steps, int batch);
/// Peak resident bytes above the baseline per byte of tensors alive at once, measured for
/// `tessera infer` (LibTorch 1.13 CPU, glibc malloc, 2-D and 3-D, tiles 40 … 2048): 1.3 with one
/// tile, up to 2.8 with many — oneDNN reorders and workspaces, and the allocator keeping the
/// blocks of earlier tiles. The upper end, so a budget holds.
inline constexpr double kInferenceAllocatorSlack = 3.0;

/// Min-max partition of stage_bytes: the memory-aware balance.
Partition balance_by_memory(const LayerSequence& seq, int stages, const StageMemoryOptions& o);

/// Any strategy by name; `layer_seconds` is used by kTime only (one entry per layer).
Partition balance(BalanceStrategy strategy, const LayerSequence& seq, int stages, const StageMemoryOptions& o,
                  const std::vector<double>& layer_seconds = {});

/// Per-layer predicted seconds for one sample from FLOPs and memory traffic:
///   (flops / device_flops + 4·(in + out elements) / memory_bandwidth) × (3 if training).
/// Backward ≈ twice forward, hence 3.
std::vector<double> predicted_layer_seconds(const LayerSequence& seq, double device_flops,
                                            double memory_bytes_per_second, bool training);

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
///         composed of differentiable steps) instead of its input.
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

/// What the planner is asked. Image extent per axis (y, x) or (z, y, x) in pixels/voxels.
struct PlanOptions {
  UNetOptions model;
  Index image;
  int devices = 1;
  int64_t device_memory_bytes = int64_t{16} << 30;
  bool training = true;
  PipelineScheduleKind schedule = PipelineScheduleKind::kOneFOneB;
  /// Activation checkpointing of the pipeline's micro-batches; unset: the planner tries never
  /// and always and keeps the faster layout that fits (always recomputes each forward:
  /// training stage time × 4/3).
  std::optional<ActivationCheckpoint> checkpoint;
  /// Sustained convolution FLOP/s of one device. Default: a conservative CPU figure (this
  /// project's 2-core machine sustains ~100 GFLOP/s on unet-small inference); calibration
  /// replaces it with a measured one.
  double device_flops = 50e9;
  double memory_bytes_per_second = 10e9;     ///< element-wise layers' traffic
  double allreduce_bytes_per_second = 1e9;   ///< ring allreduce bus bandwidth between replicas
  int64_t baseline_bytes = int64_t{256} << 20;  ///< per process: LibTorch, MPI buffers, allocator
  int max_stages = 64;                       ///< K searched in 1 … min(this, layers, devices)
  int max_micro_batches = 32;                ///< M searched in powers of two up to this
  int max_tile_candidates = 96;              ///< aligned insets T tried (geometric subset if more)
  LayerMemoryCalibration memory_calibration;  ///< measured per-layer extras (empty: the model alone)
  LayerTimeCalibration time_calibration;      ///< measured per-layer training times (empty: FLOP model)
  /// The tile inset every step must see whole (context the task needs); unset: the planner
  /// chooses T. A multiple of the alignment 2^(L−1).
  std::optional<int64_t> tile_inset;
  /// Spatial parallelism (sp): a tile split over sp ranks (spatial_plan), considered for
  /// `same`-padding networks beside pipeline stages; pp × sp is not searched.
  bool consider_spatial = true;
  double message_latency_seconds = 20e-6;    ///< α of one halo message (β: allreduce_bytes_per_second)

  PlanOptions(UNetOptions model_, Index image_, int devices_, int64_t device_memory_bytes_)
      : model(std::move(model_)), image(std::move(image_)), devices(devices_),
        device_memory_bytes(device_memory_bytes_) {}
  PlanOptions& with_training(bool t) { training = t; return *this; }
  PlanOptions& with_schedule(PipelineScheduleKind s) { schedule = s; return *this; }
  PlanOptions& with_checkpoint(ActivationCheckpoint c) { checkpoint = c; return *this; }
  PlanOptions& with_device_flops(double f) { device_flops = f; return *this; }
  PlanOptions& with_memory_bytes_per_second(double b) { memory_bytes_per_second = b; return *this; }
  PlanOptions& with_allreduce_bytes_per_second(double b) { allreduce_bytes_per_second = b; return *this; }
  PlanOptions& with_baseline_bytes(int64_t b) { baseline_bytes = b; return *this; }
  PlanOptions& with_max_stages(int k) { max_stages = k; return *this; }
  PlanOptions& with_max_micro_batches(int m) { max_micro_batches = m; return *this; }
  PlanOptions& with_memory_calibration(LayerMemoryCalibration c) { memory_calibration = std::move(c); return *this; }
  PlanOptions& with_time_calibration(LayerTimeCalibration c) { time_calibration = std::move(c); return *this; }
  PlanOptions& with_tile_inset(int64_t t) { tile_inset = t; return *this; }
  PlanOptions& with_consider_spatial(bool v) { consider_spatial = v; return *this; }
  PlanOptions& with_message_latency_seconds(double s) { message_latency_seconds = s; return *this; }

  /// Throws tessera::Error naming the first bad field.
  void validate() const;
};

/// The chosen layout and its predictions. Every field is set by plan().
struct Layout {
  int64_t tile_inset = 0;         ///< T: the inset each tile keeps, a multiple of `alignment`
  int64_t alignment = 0;          ///< 2^(L−1)
  int64_t tile_input_side = 0;    ///< T + r + 2ε read per tile
  int64_t tile_output_side = 0;   ///< T + r computed per tile
  Index tiles_per_axis;           ///< q per axis: ceil(N / T)
  int64_t tiles = 0;              ///< Π q: tiles per pass over the image
  double halo_overhead = 0;       ///< E = (T + r + 2ε)^D / T^D
  int stages = 0;                 ///< K
  std::vector<int> balance;       ///< layers per stage, memory-aware
  std::vector<std::string> stage_first_layer;  ///< name of each stage's first layer
  int micro_batches = 0;          ///< M (one tile each)
  PipelineScheduleKind schedule = PipelineScheduleKind::kOneFOneB;
  ActivationCheckpoint checkpoint = ActivationCheckpoint::kNever;
  int data_parallel = 0;          ///< dp: pipeline (or spatial) replicas
  int devices_used = 0;           ///< dp × K × sp
  int spatial = 1;                ///< sp: ranks sharing one tile (1: none); then K = 1
  std::vector<int> spatial_mesh;  ///< blocks per axis (y, x) or (z, y, x); empty when sp = 1
  int64_t halo_bytes_per_step = 0;  ///< Σ over the sp ranks of one replica, forward + backward
  double halo_seconds = 0;        ///< α-β time of the busiest rank's exchanges per step
  std::vector<int64_t> stage_memory_bytes;  ///< predicted peak per stage device (baseline included)
  int64_t peak_memory_bytes = 0;  ///< max of stage_memory_bytes
  std::vector<double> stage_seconds;        ///< per micro-batch, forward (+ backward when training)
  double bubble_fraction = 0;     ///< (K − 1) / (M + K − 1)
  double step_seconds = 0;        ///< one step: (M + K − 1) · max stage time + allreduce
  int64_t steps = 0;              ///< steps per pass over the image: ceil(tiles / (dp · M))
  double pass_seconds = 0;        ///< steps × step_seconds: one epoch (training) or one image (inference)
  double device_flops = 0;        ///< throughput the times assume
  std::vector<std::string> reasons;  ///< which limits bind, one sentence each
};

/// Searches T over aligned insets (or the one asked), K = 1 …, M in {1, 2, 4, …} with the
/// memory-aware balance, dp = min(⌊devices / K⌋, ⌈tiles / M⌉), and for `same` networks also
/// sp = 2, 4, 8, … and `devices` (spatial_meshes; K = 1, dp = min(⌊devices / sp⌋, tiles), step = the
/// largest block's share of the tile time + halo time + gradient allreduce over sp × dp
/// ranks), and returns the layout with the least
/// predicted pass time whose every stage fits device memory (ties: fewer devices, less
/// memory). Throws tessera::Error naming `device_memory` when nothing fits, with the least
/// memory any candidate needs.
Layout plan(const PlanOptions& o);

}  // namespace tessera::parallel
