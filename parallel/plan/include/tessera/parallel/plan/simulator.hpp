#pragma once
// A discrete-event simulation of one pass (a training epoch or an inference pass over the
// images) of a layout — dp data-parallel replicas × pp pipeline stages (or sp spatial ranks),
// M micro-batches of one tile per step — on a described cluster (parallel/cluster.hpp).
//
// What is simulated, per step (every replica runs the same step, so one is simulated):
//   - per layer, from the layer sequence (core/layer_sequence.hpp), a roofline for a
//     micro-batch (layer_pass_seconds): a convolution takes the longer of its compute and its
//     memory traffic; compute = FLOPs / (peak × efficiency), the efficiency read per pass
//     (forward, backward-data, backward-weights) off the device's measured convolution table
//     (conv_table.hpp: DeepBench's kernels, batch-aware, above 1 for Winograd layers), or —
//     for a device without one — the assumed curve eff(positions) with backward = 2 × forward
//     and a micro-batch of b tiles costing b × one tile. The memory-bound layers move bytes at
//     the device's memory bandwidth: norm 3 × its output forward, 5 × backward (the seed's
//     Dropout2d + InstanceNorm 5 and 7), activation 2 and 3, max pool in + out + int64
//     indices (backward zero-fills its input gradient), nearest up-sampling in + out each way,
//     concatenation 2 × out each way, and at the head the loss's 3 + 3 passes over the logits
//     (in the backward). Each layer adds α_launch forward and 2 α_launch backward. Or, when
//     given, the layer times measured on the device (`tessera plan --calibrate`: forward +
//     backward per layer and tile, split 1 : 2, b × one tile);
//   - activation checkpointing (GPipe's checkpoint = "always" / "except_last"): a
//     checkpointed micro-batch reruns its stage's forward just before its backward (all of
//     them, or all but the last, whose backward comes first), and holds only its received
//     tensors meanwhile (core/memory_model.hpp);
//   - stages cut by the planner's balance (parallel/planner.hpp: by time by default);
//   - the pipeline schedule (GPipe or 1F1B) event by event: each stage runs its ops in the
//     schedule's order, a forward waits for the activation from the stage before (plus its
//     send time: bytes / β of the link, α), a backward for the gradient from the stage after;
//     sends do not block the sender (non-blocking, DMA);
//   - spatial ranks (sp > 1, pp = 1): the largest block's share of the tile's time plus the
//     halo exchanges of spatial_plan (α-β of the link between neighbours);
//   - reading each micro-batch's input tile before stage 0's forward (I/O, not overlapped);
//   - training: each stage's gradient allreduce over its dp (× sp) replicas after the
//     backward (hierarchical ring, cluster.hpp), then (optional) its Adam update: 28 B per
//     parameter (read p, g, m, v; write p, m, v in fp32) over the memory bandwidth; the step
//     ends when the slowest stage is done.
// A pass is ceil(tiles / (dp × M)) such steps. Memory per device: the planner's stage_bytes
// plus the device's baseline. Torch-free; thread safe (no shared state).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/layer_sequence.hpp"
#include "tessera/parallel/plan/cluster.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"

namespace tessera::parallel {

/// One box of the schedule: a stage's forward or backward of a micro-batch, a send, an
/// allreduce or an input read. Times in seconds from the step's start.
struct ScheduleEvent {
  enum class Kind { kForward, kBackward, kSend, kAllreduce, kRead, kHalo, kUpdate };
  Kind kind = Kind::kForward;
  int device = 0;        ///< pipeline stage (the row of the Gantt chart)
  int micro_batch = -1;  ///< -1 for allreduce and update
  double start = 0;
  double end = 0;
};
std::string to_string(ScheduleEvent::Kind k);

/// Per-stage costs of one micro-batch, the input to the event simulation.
struct StageCosts {
  std::vector<double> forward;    ///< seconds per stage
  std::vector<double> backward;   ///< seconds per stage (empty: inference)
  std::vector<double> send;       ///< seconds to send stage s's output to s + 1 (K − 1 entries; same for the gradient)
  double read = 0;                ///< seconds to read one micro-batch's input before stage 0
  std::vector<double> allreduce;  ///< per stage, after its last backward (empty: none)
  std::vector<double> update;     ///< per stage, after its allreduce: the optimizer step (empty: none)
  std::vector<double> recompute;  ///< per stage: the forward a checkpointed backward reruns first (empty: none)
  bool recompute_last = true;     ///< false: the last micro-batch keeps its activations (except_last)
};

/// The schedule of one step of K = forward.size() stages over M micro-batches: every event and
/// the makespan. Checks (aborts) that the per-stage vectors have K entries.
struct ScheduleResult {
  std::vector<ScheduleEvent> events;
  double makespan = 0;
  std::vector<double> busy;  ///< per stage: forward + backward seconds
};
ScheduleResult simulate_schedule(const StageCosts& costs, int micro_batches, PipelineScheduleKind schedule);

/// What to simulate. `sequence` is the network at the tile's input side.
struct SimulationOptions {
  LayerSequence sequence;
  int64_t tiles = 1;           ///< tiles per pass (epoch or image set)
  int data_parallel = 1;       ///< dp
  int pipeline_stages = 1;     ///< pp (K)
  int spatial = 1;             ///< sp: ranks sharing one tile (then pp = 1)
  int micro_batches = 1;       ///< M micro-batches per step and replica
  int tiles_per_micro_batch = 1;  ///< b tiles in each micro-batch
  /// Measured training seconds (forward + backward) of each layer for one tile at the
  /// sequence's side (LayerTimeCalibration::seconds); empty: the device model's.
  std::vector<double> layer_train_seconds;
  bool optimizer_step = false;  ///< an Adam update after the allreduce
  PipelineScheduleKind schedule = PipelineScheduleKind::kGPipe;
  BalanceStrategy balance = BalanceStrategy::kTime;
  ActivationCheckpoint checkpoint = ActivationCheckpoint::kNever;  ///< training pipelines (pp ≥ 1)
  bool training = true;
  Precision precision = Precision::kFp32;
  int64_t input_bytes_per_element = 4;  ///< bytes of one input element as read from storage
  double per_tile_overhead_seconds = 0;  ///< host-side cost per tile (window extraction, stitching)

  explicit SimulationOptions(LayerSequence seq) : sequence(std::move(seq)) {}
  SimulationOptions& with_tiles(int64_t t) { tiles = t; return *this; }
  SimulationOptions& with_data_parallel(int d) { data_parallel = d; return *this; }
  SimulationOptions& with_pipeline_stages(int k) { pipeline_stages = k; return *this; }
  SimulationOptions& with_spatial(int s) { spatial = s; return *this; }
  SimulationOptions& with_micro_batches(int m) { micro_batches = m; return *this; }
  SimulationOptions& with_tiles_per_micro_batch(int b) { tiles_per_micro_batch = b; return *this; }
  SimulationOptions& with_layer_train_seconds(std::vector<double> s) { layer_train_seconds = std::move(s); return *this; }
  SimulationOptions& with_optimizer_step(bool v) { optimizer_step = v; return *this; }
  SimulationOptions& with_schedule(PipelineScheduleKind s) { schedule = s; return *this; }
  SimulationOptions& with_balance(BalanceStrategy b) { balance = b; return *this; }
  SimulationOptions& with_checkpoint(ActivationCheckpoint c) { checkpoint = c; return *this; }
  SimulationOptions& with_training(bool t) { training = t; return *this; }
  SimulationOptions& with_precision(Precision p) { precision = p; return *this; }
  SimulationOptions& with_per_tile_overhead_seconds(double s) { per_tile_overhead_seconds = s; return *this; }
  /// Throws tessera::Error naming the first bad field (and the cluster's node count).
  void validate(const ClusterModel& c) const;
};

/// Where a pass's time goes (seconds per pass; the parts add up to pass_seconds).
struct TimeBreakdown {
  double compute = 0;    ///< the busiest stage's forward + backward (+ recomputed forwards)
  double bubble = 0;     ///< its idle time inside the pipeline schedule (waits, sends)
  double halo = 0;       ///< spatial halo exchanges (0 without sp)
  double allreduce = 0;  ///< gradient allreduce not hidden (after the backward)
  double io = 0;         ///< reading input tiles
  double optimizer = 0;  ///< the optimizer's update after the allreduce
};

struct SimulationResult {
  double step_seconds = 0;
  int64_t steps = 0;
  double pass_seconds = 0;
  TimeBreakdown breakdown;
  std::vector<int> balance;                 ///< layers per stage
  std::vector<double> layer_seconds;        ///< forward (+ backward) per layer and tile
  std::vector<int64_t> device_peak_bytes;   ///< per stage (or spatial rank 0), baseline included
  bool fits_memory = true;                  ///< every device within its memory
  double tile_seconds = 0;                  ///< one tile's forward (+ backward) on one device
  double tile_flops = 0;                    ///< its FLOPs (training: 3 × forward)
  std::vector<ScheduleEvent> events;        ///< one step (the Gantt chart)
};

/// Per-layer seconds of a micro-batch of `batch` tiles (model in the header comment).
struct LayerPassSeconds {
  std::vector<double> forward, backward;
};
LayerPassSeconds layer_pass_seconds(const LayerSequence& seq, const DeviceModel& d, Precision p, int batch);
/// A convolution layer's GEMM view for the measured table at `batch` tiles (conv_table.hpp):
/// output positions of the micro-batch, C, K, kernel taps (from its FLOPs: 2·taps·C·K per
/// output position) and whether cuDNN may run it as Winograd (2-D, 3 × 3, stride 1).
ConvQuery conv_query(const Layer& l, int dims, int batch);
/// layer_pass_seconds(seq, d, p, 1).forward.
std::vector<double> layer_forward_seconds(const LayerSequence& seq, const DeviceModel& d, Precision p);

SimulationResult simulate(const SimulationOptions& o, const ClusterModel& c);

/// The step's schedule as an SVG document: one row per device, boxes coloured by kind
/// (forward, backward, send, allreduce, read, halo), a time axis in seconds.
std::string gantt_svg(const std::vector<ScheduleEvent>& events, const std::string& title);

/// The layer sequence of the seed paper's U-Net (Seal et al. 2020 = torchgpipe's benchmark
/// U-Net; plugins/seed_unet) for `o` (levels = depth + 1, convs_per_level, base_filters,
/// in_channels, classes, dims) at cubic input side `side` (>= 2^(levels − 1); pooling floors):
/// bias-free `same` convolutions, instance norm (no parameters), LeakyReLU, nearest
/// up-sampling, decoder halving one level early, a bias-free 1×1 head. Its parameter count is
/// the seed's table. Throws tessera::Error naming `side` when it is too small.
LayerSequence seed_unet_layer_sequence(const UNetOptions& o, int64_t side);

/// The layer sequence the simulator uses for `o`: the seed's for models named "s0-…",
/// unet_layer_sequence otherwise.
LayerSequence simulated_layer_sequence(const UNetOptions& o, int64_t side);

}  // namespace tessera::parallel
