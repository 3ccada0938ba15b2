#include "ct_cases.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "ct_anatomy.hpp"
#include "random.hpp"

namespace tessera::sample {
namespace {

constexpr double kFieldXy = 115.2;  // mm across: the old phantom's 128 × 0.9 mm
constexpr double kFieldZ = 256.0;   // mm along z: 128 × 2 mm
constexpr double kSliceRatios[] = {1.0, 1.5, 2.0, 2.5, 3.0, 4.0};

// Wider than the target domains' patients (AnatomyVariant::target_domain): another patient per case.
constexpr AnatomyVariant::Ranges kHardPatient = {.body_low = 0.9, .body_high = 1.08,
                                                 .liver_shift = 0.06, .liver_scale_low = 0.85, .liver_scale_high = 1.15,
                                                 .kidney_shift_v = 0.04, .kidney_shift_w = 0.06,
                                                 .kidney_scale_low = 0.85, .kidney_scale_high = 1.2};

// Noise σ after the in-plane kernel: one (1 2 1) pass per axis keeps 6/16 of σ, two 70/256.
CtScanner hard_scanner(Rng& rng, bool thick) {
  CtScanner s;
  s.contrast = float(rng.uniform(0.85, 1.2));
  s.hu_offset = float(rng.uniform(-30.0, 60.0));
  s.kernel_passes = rng.uniform() < 0.5 ? 1 : 2;
  s.thick_slices = thick;
  const double out_sigma = rng.uniform(8.0, 30.0);
  s.noise_sigma = float(out_sigma / (s.contrast * (s.kernel_passes >= 2 ? 70.0 / 256.0 : 6.0 / 16.0)));
  return s;
}

// Reverses the voxels along `axis` (0 = z, 1 = y, 2 = x) of a z-major volume.
template <class T>
void flip_axis(std::vector<T>& v, const Index& extent, int axis) {
  const int64_t nz = extent[0], ny = extent[1], nx = extent[2];
  for (int64_t z = 0; z < nz; ++z)
    for (int64_t y = 0; y < ny; ++y)
      for (int64_t x = 0; x < nx; ++x) {
        const int64_t fz = axis == 0 ? nz - 1 - z : z, fy = axis == 1 ? ny - 1 - y : y, fx = axis == 2 ? nx - 1 - x : x;
        const int64_t a = (z * ny + y) * nx + x, b = (fz * ny + fy) * nx + fx;
        if (a < b) std::swap(v[size_t(a)], v[size_t(b)]);
      }
}

// Stores the voxels flipped along ITK axis `itk` (0 = x, 1 = y, 2 = z) and says so in the
// geometry: direction −1 there, origin at the far end, so each voxel keeps its LPS position.
void flip(CtPhantom& ct, int itk) {
  const int axis = 2 - itk;
  flip_axis(ct.hu, ct.extent, axis);
  flip_axis(ct.labels, ct.extent, axis);
  ct.geo.origin[size_t(itk)] += ct.geo.spacing[size_t(itk)] * double(ct.extent[size_t(axis)] - 1);
  ct.geo.direction[size_t(4 * itk)] = -1.0;
}

}  // namespace

CtPhantom make_hard_ct_case(uint64_t seed, int index, int ct_size) {
  Rng rng(mix_seed(seed, 500 + uint64_t(index)));
  const double s = kFieldXy / ct_size * rng.uniform(0.8, 1.25);
  const double ratio = kSliceRatios[std::min<size_t>(size_t(rng.uniform() * 6.0), 5)];
  const double field_xy = kFieldXy * rng.uniform(0.95, 1.1), field_z = kFieldZ * rng.uniform(0.9, 1.1);
  PhantomRecipe r;
  const int64_t nxy = std::max<int64_t>(16, std::llround(field_xy / s));
  r.extent = {std::max<int64_t>(16, std::llround(field_z / (s * ratio))), nxy, nxy};
  r.spacing = {s, s, s * ratio};
  r.seed = mix_seed(seed, 600 + uint64_t(index));
  r.anatomy = AnatomyVariant::draw(rng, kHardPatient);
  r.scanner = hard_scanner(rng, ratio >= 3.0);
  r.calibrate = true;
  CtPhantom ct = render_ct_phantom(r);
  if (index % 2 == 1) flip(ct, 0);
  if (index % 3 == 2) flip(ct, 1);
  if (index % 4 == 3) flip(ct, 2);
  return ct;
}

std::string describe_hard_case(const CtPhantom& ct) {
  const auto& g = ct.geo;
  std::string flips;
  for (int a = 0; a < 3; ++a)
    if (g.direction[size_t(4 * a)] < 0) flips += std::string(flips.empty() ? "" : " ") + "xyz"[a];
  return fmt::format("spacing {:.3f} x {:.3f} x {:.3f} mm, {}, {}", g.spacing[0], g.spacing[1], g.spacing[2],
                     flips.empty() ? "identity direction" : "flipped " + flips, ct.scanner.describe());
}

}  // namespace tessera::sample
