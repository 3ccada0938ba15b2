#pragma once
// The held-back area convention shared by `train` and `eval`: the last `fraction` of one
// axis (x for rasters, z for volumes by default) is never trained on and is what the
// demo evaluates. Boxes are pixel/voxel index boxes, axis order (y, x) or (z, y, x).
#include <string>

#include "tessera/core/geometry.hpp"

namespace tessera::engine {

struct Holdout {
  std::string axis;       ///< "x", "y" or "z"; empty means x (2-D) / z (3-D)
  double fraction = 0.0;  ///< 0 keeps everything for training

  void validate(int dims) const;
};

Box training_region(const Index& extent, const Holdout& h);
Box holdout_region(const Index& extent, const Holdout& h);

}  // namespace tessera::engine
