#pragma once
// Boxes and dense blocks in pixel/voxel index space, for 2-D and 3-D alike.
// Axis order follows the tensor layout: 2-D is (y, x), 3-D is (z, y, x). Coordinates are
// integer indices into the image grid; a Box may extend outside the image (halos).
// Plain value types, no LibTorch: the viewer uses them too.
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

using Index = std::vector<int64_t>;

struct Box {
  Index origin;  ///< first index per axis (may be negative for halos)
  Index size;    ///< extent per axis, >= 0

  int dims() const { return static_cast<int>(size.size()); }
  int64_t count() const;  ///< number of pixels/voxels
  Index end() const;      ///< origin + size
  bool empty() const { return count() == 0; }
  /// The part of this box inside [0, extent); may be empty.
  Box clipped(const Index& extent) const;
  bool contains(const Box& other) const;
  bool operator==(const Box&) const = default;
};

std::string to_string(const Index& index);
std::string to_string(const Box& box);

/// Mirror index i into [0, n) without repeating the edge (numpy/torch "reflect"),
/// for any i, however far outside. n == 1 maps everything to 0.
int64_t reflect_index(int64_t i, int64_t n);

/// A dense C-contiguous array: shape[0] is channels, the rest follow Box axis order.
template <class T>
struct Block {
  Index shape;
  std::vector<T> data;

  Block() = default;
  explicit Block(Index shape_);
  int64_t numel() const;
};

extern template struct Block<float>;
extern template struct Block<uint8_t>;
extern template struct Block<uint16_t>;

}  // namespace tessera
