#pragma once
// Private to the CT phantom: what tissue sits at one point. Positions come twice: normalised
// (u, v across the field of view in [−1, 1], u towards the patient's left, v posterior;
// w ∈ [0, 1] from the feet to the head) for the layout, and in millimetres for textures
// so they look isotropic whatever the spacing.
#include <cstdint>

namespace tessera::sample {

struct Tissue {
  float hu = -1000.f;
  uint8_t label = 0;
};

struct Point3 {
  double u, v, w;     // normalised layout coordinates
  double x, y, z;     // millimetres
};

/// Deterministic in `seed`; a pure function of the point, so callers may evaluate in any order.
Tissue tissue_at(const Point3& p, uint64_t seed);

}  // namespace tessera::sample
