#pragma once
// Convolution kernels measured on a GPU (DeepBench's training results, copied by
// scripts/deepbench_conv_table.py into clusters/devices/*-deepbench.yaml) and the efficiency
// the simulator reads off them for any convolution layer.
//
// Each measured shape becomes a point: its GEMM view (M = N·P·Q output positions of the batch,
// reduction C·R·S, K output channels) and, per pass (forward, backward-data, backward-weights),
// its effective efficiency = direct-convolution FLOPs (2·N·K·C·R·S·P·Q) / (time × the measured
// GPU's datasheet peak). Winograd and FFT kernels do fewer multiplies than that count, so 3×3
// layers reach an effective efficiency above 1 (DeepBench's V100 3×3, 28², 256 → 512, batch 16
// forward: 2.35). A layer's efficiency is interpolated, never fitted:
//   - 2-D 3 × 3 stride-1 layers read the 2-D 3 × 3 stride-1 points (any algorithm cuDNN chose);
//     every other layer (1 × 1, 3-D, transposed) reads the points cuDNN ran as a GEMM
//     (IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM, GEMM: no Winograd for them);
//   - in log2 space of (M, reduction, K), each coordinate clamped to the points' range (no
//     extrapolation: a 1434² map reads the largest measured M), the inverse-square-distance
//     mean of the 4 nearest points that measured that pass (an exact hit is that point).
// A table measured on one GPU serves another of the same architecture through the efficiency
// (the P40 reads the TITAN Xp's GP102 table): time = FLOPs / (efficiency × this peak).
// Torch-free; thread safe once loaded.
#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include "tessera/core/precision.hpp"

namespace tessera::parallel {

enum class ConvPass { kForward = 0, kBackwardData = 1, kBackwardWeights = 2 };

/// One convolution layer as the table sees it.
struct ConvQuery {
  double positions = 0;     ///< M: output positions of the whole micro-batch (N·P·Q[·D])
  double in_channels = 0;   ///< C
  double out_channels = 0;  ///< K
  double taps = 9;          ///< R·S[·T]: kernel elements
  bool winograd_shape = true;  ///< 2-D, 3 × 3, stride 1
};

struct ConvPoint {
  std::array<double, 3> log2_gemm{};  ///< log2 of M, C·R·S, K
  bool winograd_shape = false;
  bool gemm_algorithm = false;
  std::array<double, 3> efficiency{};  ///< per ConvPass; < 0: not measured
};

struct ConvTable {
  std::string source;  ///< "repository path @ commit" (the file's provenance)
  std::vector<ConvPoint> fp32, fp16;

  bool empty() const { return fp32.empty(); }
  /// Effective efficiency (may exceed 1) of `pass` for `q` at precision `p`. Throws
  /// tessera::Error when the table has no points for `p` (e.g. fp16 on a GP102 table).
  double efficiency(Precision p, ConvPass pass, const ConvQuery& q) const;
  /// Where `q` lies against the points `efficiency` reads, per GEMM coordinate (M, C·R·S, K):
  /// −1 below their range, +1 above it (clamped there), 0 inside. Throws as `efficiency`.
  std::array<int, 3> clamped(Precision p, ConvPass pass, const ConvQuery& q) const;
};

/// Reads clusters/devices/*-deepbench.yaml (see scripts/deepbench_conv_table.py). Errors name
/// the file and the key or row.
ConvTable load_conv_table(const std::filesystem::path& path);

}  // namespace tessera::parallel
