#pragma once
// The mesh of spatial parallelism and its geometry (parallel/modes/spatial.hpp runs it; the
// planner prices it): `parts[a]` blocks along spatial axis a, ranks numbered row-major (the
// last axis fastest). Along an axis of S elements, blocks are whole multiples of an alignment
// A (2^(levels−1) for a U-Net, so every block starts on a multiple of every pooling factor):
// S / A units shared as evenly as possible, the first blocks one unit larger when they do not
// divide. S must be a multiple of A and hold at least one unit per block. Torch-free.
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// Blocks per spatial axis; the product is the spatial group's size.
struct SpatialMesh {
  std::vector<int> parts;

  /// {ranks, 1, …}: a 1-D split along the first spatial axis (rows, or slices of a volume).
  static SpatialMesh along_first_axis(int ranks, int dims);
  /// "2x2", "2x2x1", "4" (then split along the first axis); missing trailing axes are 1.
  /// Throws tessera::Error naming `flag` when the text is not that or has more than `dims` axes.
  static SpatialMesh parse(const std::string& text, int dims, const std::string& flag = "--sp-mesh");
  int size() const;
  int dims() const { return static_cast<int>(parts.size()); }
  /// Mesh coordinates of spatial rank `rank` (row-major, last axis fastest).
  std::vector<int> coordinates(int rank) const;
  /// Spatial rank at `coords`; -1 outside the mesh.
  int rank_of(const std::vector<int>& coords) const;
  /// "2 × 2".
  std::string describe() const;
};

/// Offsets of the blocks of one axis: parts + 1 values from 0 to `side` (see the header
/// comment). Throws tessera::Error naming `what` when `side` is not a multiple of
/// `alignment` or is too small for `parts` blocks.
std::vector<int64_t> block_offsets(int64_t side, int parts, int64_t alignment, const std::string& what);

/// Bytes a rank of block `extent` (per spatial axis) at mesh coordinates `coords` sends in
/// one forward halo exchange of width `width`, for `leading` = N · C elements of
/// `element_bytes` each per spatial position. Backward sends the same amount back.
int64_t halo_send_bytes(const SpatialMesh& mesh, const std::vector<int>& coords, const std::vector<int64_t>& extent,
                        int64_t leading, int64_t width, int64_t element_bytes);

}  // namespace tessera
