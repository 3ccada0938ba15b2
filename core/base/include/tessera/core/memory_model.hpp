#pragma once
// The memory model of a U-Net's layers on one device: a pipeline stage of consecutive layers
// [first, last] of a layer sequence (core/layer_sequence.hpp), training or inference, and the
// single-process tiled inference that `--tile auto` sizes (tile_choice.hpp). The planner
// (parallel/plan/) prices layouts with it; core's tile choice calls it directly. Torch-free:
// plain arithmetic on LayerSequence; thread safe (no shared state).
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
//   inference: 4 B per parameter + max over the stage's layers of what run_layers (unet.cpp)
//              holds there: the layer's input and output (one tensor for an in-place ReLU),
//              its convolution block's input (kept until the block ends) and the skip tensors
//              the stage holds at that layer (released by their concatenation).
// Plus a fixed per-process baseline (LibTorch, MPI buffers) in the planner.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/geometry.hpp"
#include "tessera/core/layer_sequence.hpp"

namespace tessera {

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
  /// micro_batches >= 1 (a calibrated extra may be negative: the model's own term can
  /// over-predict a layer). Throws tessera::Error naming the field.
  void validate() const;
  /// Micro-batches whose activations a stage holds at once.
  int in_flight(int from_end) const;
};

/// Predicted peak bytes of the stage holding layers [first, last] (model in the header
/// comment), excluding the per-process baseline.
int64_t stage_bytes(const LayerSequence& seq, int first, int last, int from_end, const StageMemoryOptions& o);

/// The terms stage_bytes() adds for one stage, for searches that price many micro-batch
/// counts and checkpointing modes of the same stage (the planner): fixed bytes (parameters,
/// optimiser, inference's working set), what each further micro-batch in flight holds whole,
/// what a checkpointed micro-batch keeps (its received tensors), and the micro-batch being
/// computed at its worst layer.
struct StageTerms {
  int64_t fixed = 0;
  int64_t per_flight = 0;
  int64_t received = 0;
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

/// stage_bytes()' terms of the stage [first, last]; `extra` is empty or one calibrated extra
/// per layer. Throws tessera::Error when `extra` has another length.
StageTerms stage_terms(const LayerSequence& seq, int first, int last, bool training, const std::vector<int64_t>& extra);

/// The layer sequence of a box whose input side differs per axis (unet_layer_sequence is for
/// cubes): the same layers, each element count (and FLOPs) the product of its per-axis sides.
LayerSequence box_layer_sequence(const UNetOptions& model, const Index& input_sides);

/// Forward-only tiled inference of the whole network in one process (core/inference.hpp, no
/// autograd): predicted peak bytes, per-process baseline excluded, for `batch` tiles of inset
/// `steps` per axis (a tile clamped to a thin image is no cube; each axis reads step + r + 2ε).
/// The network's share is stage_bytes()' inference model for one stage holding every layer
/// (weights + per tile the largest working set: a layer's input and output, the block input
/// run_layers keeps until the block ends, and the skips alive at it); beside it the tiled loop
/// holds the batch's stacked input and valid masks and, with `read_ahead` (more tiles than one
/// batch), the next batch being read: its windows, their stacked copy and masks. Bytes of
/// tensors, no allocator factor: LibTorch's CPU allocator is the tensor cache
/// (cpu_tensor_cache.hpp), whose footprint never passes the largest live total, and the
/// channels-last convolutions run without reorder buffers (measured: the RSS peak of a 2048²
/// unet-tiny forward exceeds its largest live tensor total by 20 MiB; docs/measured-results.md).
/// Throws tessera::Error when the network cannot take a side.
int64_t inference_bytes(const UNetOptions& model, const Index& steps, int batch, bool read_ahead = true);
/// Peak resident bytes above the process's baseline per byte of a stream's tensors
/// (StreamFootprint::tensors: carried rows, the working strip, two windows, the logits rows),
/// measured for `tessera infer --mode stream` (LibTorch 1.13 CPU, glibc malloc with the mmap
/// threshold the stream fixes). Beyond the counted tensors it covers oneDNN's primitives (one
/// per convolution shape, kept in its cache), GDAL's block rows, the second column piece's
/// thread and the tensor cache's reuse slack. Read off measured runs: docs/streaming.md,
/// "Memory: where it goes, and the floor".
inline constexpr double kStreamResidentFactor = 2.0;

/// Streamed inference (core/stream_executor.hpp) over a whole padded input of `whole_input`
/// sides (unet_whole_input) in strips of `strip` input rows (slices): a dry run of the
/// executor's row bookkeeping, strip by strip, in row counts times each layer's bytes per row
/// (channels × its sides across). So `carried` is exactly what StreamExecutor::peak_held_bytes
/// measures; it depends on the image's width, not on its height:
///   carried = max over strips of Σ_conv (K − 1)·row_in + Σ_pool (odd row)·row_in
///             + Σ_skip (encoder rows produced − rows the decoder has passed)·row_skip,
/// the last term the skip's delay, about its crop plus the deeper path's lag in rows.
struct StreamFootprint {
  int64_t carried = 0;  ///< peak bytes of carried rows and skip delay buffers
  int64_t working = 0;  ///< peak bytes of one layer's strip: its input joined to its carry, and its output
  int64_t window = 0;   ///< one strip's input window (values, valid mask) and its channels-last copy
  int64_t logits = 0;   ///< one strip's rows of logits
  int64_t bytes = 0;    ///< predicted peak above the baseline: stream_resident_bytes(model, tensors())

  /// The stream's tensors at their peak: carried + working + two windows (one read ahead) + logits.
  int64_t tensors() const { return carried + working + 2 * window + logits; }
};
/// Throws tessera::Error for a side across that the network cannot take.
StreamFootprint stream_footprint(const UNetOptions& model, const Index& whole_input, int64_t strip);
/// The one formula for a stream's resident bytes above the baseline: the weights (float32,
/// once) + kStreamResidentFactor × `tensors` (StreamFootprint::tensors, summed over column pieces).
int64_t stream_resident_bytes(const UNetOptions& model, int64_t tensors);

}  // namespace tessera
