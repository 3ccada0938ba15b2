#include "ct_phantom.hpp"

#include <algorithm>
#include <cmath>

#include "ct_anatomy.hpp"
#include "random.hpp"
#include "tessera/core/error.hpp"

namespace tessera::sample {
namespace {

constexpr float kNoiseBeforeFilter = 40.f;  // HU; the in-plane (1 2 1) filter leaves ~15

// In-place (1 2 1)/4 filter along one axis (0 = z, 1 = y, 2 = x), edges clamped.
void smooth_axis(std::vector<float>& v, const Index& extent, int axis) {
  const int64_t nz = extent[0], ny = extent[1], nx = extent[2];
  const int64_t stride = axis == 0 ? nx * ny : axis == 1 ? nx : 1;
  const int64_t n = extent[size_t(axis)];
  std::vector<float> line(static_cast<size_t>(n));
  for (int64_t z = 0; z < (axis == 0 ? 1 : nz); ++z)
    for (int64_t y = 0; y < (axis == 1 ? 1 : ny); ++y)
      for (int64_t x = 0; x < (axis == 2 ? 1 : nx); ++x) {
        float* base = v.data() + (z * ny + y) * nx + x;
        for (int64_t i = 0; i < n; ++i) line[size_t(i)] = base[i * stride];
        for (int64_t i = 0; i < n; ++i) {
          const float prev = line[size_t(std::max<int64_t>(i - 1, 0))];
          const float next = line[size_t(std::min<int64_t>(i + 1, n - 1))];
          base[i * stride] = 0.25f * prev + 0.5f * line[size_t(i)] + 0.25f * next;
        }
      }
}

}  // namespace

void CtOptions::validate() const {
  if (size < 16 || size > 1024)
    throw Error("--ct-size: " + std::to_string(size) + " is outside [16, 1024] voxels");
  if (!(spacing_xy > 0.0) || !(spacing_z > 0.0))
    throw Error("ct spacing: must be positive");
}

const std::vector<std::string>& ct_class_names() {
  static const std::vector<std::string> names{"background", "liver", "kidney"};
  return names;
}

CtPhantom make_ct_phantom(const CtOptions& options) {
  options.validate();
  const int64_t n = options.size;
  CtPhantom ct;
  ct.extent = {n, n, n};
  ct.geo.spacing = {options.spacing_xy, options.spacing_xy, options.spacing_z};
  ct.geo.origin = {-0.5 * n * options.spacing_xy, -0.5 * n * options.spacing_xy,
                   -0.5 * n * options.spacing_z};
  ct.geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const size_t count = size_t(n * n * n);
  ct.hu.resize(count);
  ct.labels.resize(count);

  const uint64_t anatomy_seed = mix_seed(options.seed, 2);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < n; ++i) {
        Point3 p;
        p.u = (i + 0.5) / double(n) * 2.0 - 1.0;
        p.v = (j + 0.5) / double(n) * 2.0 - 1.0;
        p.w = (k + 0.5) / double(n);
        p.x = ct.geo.origin[0] + i * ct.geo.spacing[0];
        p.y = ct.geo.origin[1] + j * ct.geo.spacing[1];
        p.z = ct.geo.origin[2] + k * ct.geo.spacing[2];
        const Tissue t = tissue_at(p, anatomy_seed);
        const size_t at = size_t((k * n + j) * n + i);
        ct.hu[at] = t.hu;
        ct.labels[at] = t.label;
      }

  // Partial volume, then noise that the reconstruction kernel correlates within each slice.
  for (int axis = 0; axis < 3; ++axis) smooth_axis(ct.hu, ct.extent, axis);
  Rng rng(mix_seed(options.seed, 3));
  for (float& v : ct.hu) v += kNoiseBeforeFilter * float(rng.normal());
  smooth_axis(ct.hu, ct.extent, 1);
  smooth_axis(ct.hu, ct.extent, 2);
  for (float& v : ct.hu) v = std::clamp(std::round(v), -1024.f, 3071.f);
  return ct;
}

}  // namespace tessera::sample
