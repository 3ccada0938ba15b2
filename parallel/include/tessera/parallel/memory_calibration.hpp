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
/// gradients exist, as in every step after the first). Returns, per layer, the peak
/// resident-memory increase of that run minus the activation part of stage_bytes() for the
/// one-layer stage (M = 1): the bytes the model leaves out (negative where it overestimates).
/// `progress(done, total)` is called after each layer. Single process, Linux (PeakMemoryMeter).
std::vector<int64_t> measure_layer_extra_bytes(const UNetImpl& full, const LayerSequence& seq,
                                               const std::function<void(int, int)>& progress = {});

}  // namespace tessera::parallel
