#pragma once
// The planner: the whole layout — tile inset T, q × q (× q) tiling, pipeline stages K with
// their memory-aware balance (partition.hpp), micro-batches M, data-parallel degree, or a
// tile split over sp ranks (spatial_cost.hpp) — chosen from the memory model
// (core/memory_model.hpp) and a model of time, with the reasons it binds. Torch-free; thread
// safe (no shared state).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/geometry.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/parallel/plan/layer_costs.hpp"

namespace tessera::parallel {

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
