#pragma once
// Measuring what the planner's stage memory model (planner.hpp) leaves out, layer by layer,
// on this machine: the figures behind LayerMemoryCalibration and `tessera plan --calibrate`.
#include <cstdint>
#include <functional>
#include <vector>

#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/unet.hpp"

namespace tessera::parallel {

/// For every layer of `seq` (== unet_layer_sequence(full.options(), side)): runs a pipeline
/// stage holding that layer alone forward and backward on one tile, the way a pipeline step
/// does — its input and skip inputs arrive in fresh tensors, so do the gradients of its
/// outputs; the last layer computes the cross-entropy loss — after a warm-up run (parameter
/// gradients exist, as in every step after the first). Returns the peak resident-memory
/// increase of one run minus the activation part of stage_bytes() for the one-layer stage
/// (M = 1): the bytes the model leaves out (negative where it overestimates).
/// `progress(done, total)` is called after each layer. Single process, Linux. Note: the
/// first call fixes glibc's mmap threshold for the process (PeakMemoryMeter), which slows
/// later allocations; time before measuring memory.
std::vector<int64_t> measure_layer_extra_bytes(const UNetImpl& full, const LayerSequence& seq,
                                               const std::function<void(int, int)>& progress = {});

/// How measure_layer_seconds runs each one-layer stage, so that it times what the priced run
/// does: `tiles` per pass (the run's micro-batch: per-operation overheads spread over its
/// tiles) and channels-last weights and tensors (as train.channels_last) or contiguous ones.
struct LayerTiming {
  int64_t tiles = 1;
  bool channels_last = false;
};

/// The same one-layer stages' forward + backward seconds per tile, each stage run on
/// `timing.tiles` tiles at once (inputs made beforehand; median of three runs after a
/// warm-up, divided by the tiles). The caller sets the memory policy the run has (the
/// training's CpuRunMemoryScope: its tensor cache saves re-faulting large buffers). Throws
/// tessera::Error when `timing.tiles` < 1.
std::vector<double> measure_layer_seconds(const UNetImpl& full, const LayerSequence& seq, const LayerTiming& timing = {},
                                          const std::function<void(int, int)>& progress = {});

}  // namespace tessera::parallel
