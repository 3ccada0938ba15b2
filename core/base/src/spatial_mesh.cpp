#include "tessera/core/spatial_mesh.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

}  // namespace

SpatialMesh SpatialMesh::along_first_axis(int ranks, int dims) {
  SpatialMesh m;
  m.parts.assign(static_cast<size_t>(std::max(dims, 1)), 1);
  m.parts[0] = ranks;
  return m;
}

SpatialMesh SpatialMesh::parse(const std::string& text, int dims, const std::string& flag) {
  SpatialMesh m;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, 'x')) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != part.size() || v < 1)
      throw Error(flag + " " + text + ": expected blocks per axis such as 4, 2x2 or 2x2x1");
    m.parts.push_back(v);
  }
  if (m.parts.empty() || static_cast<int>(m.parts.size()) > dims)
    throw Error(flag + " " + text + ": " + std::to_string(m.parts.size()) + " axes for a " + std::to_string(dims) +
                "-D model");
  m.parts.resize(static_cast<size_t>(dims), 1);
  return m;
}

int SpatialMesh::size() const { return std::accumulate(parts.begin(), parts.end(), 1, std::multiplies<>()); }

std::vector<int> SpatialMesh::coordinates(int rank) const {
  std::vector<int> c(parts.size());
  for (int a = dims() - 1; a >= 0; --a) {
    c[size_t(a)] = rank % parts[size_t(a)];
    rank /= parts[size_t(a)];
  }
  return c;
}

int SpatialMesh::rank_of(const std::vector<int>& coords) const {
  int r = 0;
  for (int a = 0; a < dims(); ++a) {
    if (coords[size_t(a)] < 0 || coords[size_t(a)] >= parts[size_t(a)]) return -1;
    r = r * parts[size_t(a)] + coords[size_t(a)];
  }
  return r;
}

std::string SpatialMesh::describe() const {
  std::string s;
  for (size_t a = 0; a < parts.size(); ++a) s += (a ? " × " : "") + std::to_string(parts[a]);
  return s;
}

std::vector<int64_t> block_offsets(int64_t side, int parts, int64_t alignment, const std::string& what) {
  if (alignment < 1 || side % alignment != 0)
    throw Error(what + ": side " + std::to_string(side) + " is not a multiple of " + std::to_string(alignment) +
                " (every block must start on a multiple of the network's pooling factor)");
  const int64_t units = side / alignment;
  if (units < parts)
    throw Error(what + ": side " + std::to_string(side) + " cannot be split into " + std::to_string(parts) +
                " blocks of at least " + std::to_string(alignment) + " (use fewer spatial ranks on this axis)");
  std::vector<int64_t> offsets{0};
  for (int p = 0; p < parts; ++p) offsets.push_back(offsets.back() + (units / parts + (p < units % parts)) * alignment);
  return offsets;
}

int64_t halo_send_bytes(const SpatialMesh& mesh, const std::vector<int>& coords, const std::vector<int64_t>& extent,
                        int64_t leading, int64_t width, int64_t element_bytes) {
  int64_t bytes = 0;
  std::vector<int64_t> sides = extent;
  for (int a = 0; a < mesh.dims(); ++a) {
    if (mesh.parts[size_t(a)] > 1) {
      const int neighbours = (coords[size_t(a)] > 0) + (coords[size_t(a)] < mesh.parts[size_t(a)] - 1);
      std::vector<int64_t> slab = sides;
      slab[size_t(a)] = width;
      bytes += neighbours * product(slab) * leading * element_bytes;
    }
    sides[size_t(a)] += 2 * width;  // the next axis sends slabs that include this axis' halos
  }
  return bytes;
}

}  // namespace tessera
