#pragma once
// Per-layer costs the planner adds to the memory model (core/memory_model.hpp) and its FLOP
// model of time: what `tessera plan --calibrate` measured on this machine (memory beyond the
// model, seconds per unit of work), and the predicted seconds without a measurement.
// Torch-free; thread safe.
#include <cstdint>
#include <vector>

#include "tessera/core/layer_sequence.hpp"

namespace tessera::parallel {

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

/// Per-layer predicted seconds for one sample from FLOPs and memory traffic:
///   (flops / device_flops + 4·(in + out elements) / memory_bandwidth) × (3 if training).
/// Backward ≈ twice forward, hence 3.
std::vector<double> predicted_layer_seconds(const LayerSequence& seq, double device_flops,
                                            double memory_bytes_per_second, bool training);

}  // namespace tessera::parallel
