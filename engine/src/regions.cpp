#include "tessera/engine/regions.hpp"

#include <cmath>

#include "tessera/core/error.hpp"

namespace tessera::engine {
namespace {

int axis_index(const Holdout& h, int dims) {
  const std::string axis = h.axis.empty() ? (dims == 2 ? "x" : "z") : h.axis;
  if (axis == "x") return dims - 1;
  if (axis == "y") return dims - 2;
  if (axis == "z" && dims == 3) return 0;
  throw Error("holdout axis '" + axis + "' does not exist for a " + std::to_string(dims) + "-D image");
}

int64_t split_at(const Index& extent, const Holdout& h, int a) {
  return extent[a] - static_cast<int64_t>(std::llround(h.fraction * double(extent[a])));
}

}  // namespace

void Holdout::validate(int dims) const {
  if (fraction < 0 || fraction >= 1) throw Error("holdout fraction " + std::to_string(fraction) + " must be in [0, 1)");
  axis_index(*this, dims);
}

Box training_region(const Index& extent, const Holdout& h) {
  Box b{Index(extent.size(), 0), extent};
  const int a = axis_index(h, static_cast<int>(extent.size()));
  b.size[a] = split_at(extent, h, a);
  return b;
}

Box holdout_region(const Index& extent, const Holdout& h) {
  Box b{Index(extent.size(), 0), extent};
  const int a = axis_index(h, static_cast<int>(extent.size()));
  b.origin[a] = split_at(extent, h, a);
  b.size[a] = extent[a] - b.origin[a];
  return b;
}

}  // namespace tessera::engine
