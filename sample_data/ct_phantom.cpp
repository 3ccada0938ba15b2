#include "ct_phantom.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ct_anatomy.hpp"
#include "random.hpp"
#include "tessera/core/error.hpp"

namespace tessera::sample {
namespace {

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

// Noise σ after `passes` in-plane (1 2 1)/4 passes: one pass per axis keeps
// √(6/16) of σ, two keep √(70/256); both axes multiply.
double kernel_noise_factor(int passes) { return passes >= 2 ? 70.0 / 256.0 : 6.0 / 16.0; }

}  // namespace

CtScanner CtScanner::target_domain(uint64_t seed, int k) {
  Rng rng(mix_seed(domain_seed(seed, k), 70));
  const double t = domain_shift(k);
  CtScanner s;
  s.hu_offset = float(40.0 + 40.0 * t * rng.uniform());
  const double swing = t * rng.uniform(0.1, 0.25);
  s.contrast = float(k % 2 == 1 ? std::min(1.25, 1.0 + swing) : std::max(0.8, 1.0 - swing));
  s.kernel_passes = k % 2 == 0 ? 2 : 1;
  s.thick_slices = k >= 3 && k % 2 == 1;
  const double out_sigma = k % 2 == 0 ? rng.uniform(8.0, 12.0) : rng.uniform(20.0, 20.0 + 15 * t);
  s.noise_sigma = float(out_sigma / (s.contrast * kernel_noise_factor(s.kernel_passes)));
  return s;
}

double CtScanner::output_noise() const {
  return noise_sigma * contrast * kernel_noise_factor(kernel_passes);
}

std::string CtScanner::describe() const {
  return fmt::format("scanner: HU' = {:.0f} + {:.3f} (HU - {:.0f}) {:+.1f}, noise {:.1f} HU, "
                     "{} kernel{}",
                     kSoftTissueHu, contrast, kSoftTissueHu, hu_offset, output_noise(),
                     kernel_passes >= 2 ? "soft" : "standard",
                     thick_slices ? ", thick slices" : "");
}

void CtOptions::validate() const {
  if (size < 16 || size > 1024)
    throw Error("--ct-size: " + std::to_string(size) + " is outside [16, 1024] voxels");
  if (domain < 0 || domain > kMaxTargetDomains)
    throw Error("ct domain: " + std::to_string(domain) + " is outside [0, " +
                std::to_string(kMaxTargetDomains) + "]");
  if (!(spacing_xy > 0.0) || !(spacing_z > 0.0))
    throw Error("ct spacing: must be positive");
}

const std::vector<std::string>& ct_class_names() {
  static const std::vector<std::string> names{"background", "liver", "kidney"};
  return names;
}

CtPhantom render_ct_phantom(const PhantomRecipe& r) {
  const int64_t nz = r.extent[0], ny = r.extent[1], nx = r.extent[2];
  CtPhantom ct;
  ct.extent = r.extent;
  ct.geo.spacing = r.spacing;
  ct.geo.origin = {-0.5 * nx * r.spacing[0], -0.5 * ny * r.spacing[1], -0.5 * nz * r.spacing[2]};
  ct.geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const size_t count = size_t(nz * ny * nx);
  ct.hu.resize(count);
  ct.labels.resize(count);

  const AnatomyTextures textures(mix_seed(r.seed, 2));
  ct.scanner = r.scanner;
  const CtScanner& scanner = ct.scanner;
  for (int64_t k = 0; k < nz; ++k)
    for (int64_t j = 0; j < ny; ++j)
      for (int64_t i = 0; i < nx; ++i) {
        Point3 p;
        p.u = (i + 0.5) / double(nx) * 2.0 - 1.0;
        p.v = (j + 0.5) / double(ny) * 2.0 - 1.0;
        p.w = (k + 0.5) / double(nz);
        p.x = ct.geo.origin[0] + i * ct.geo.spacing[0];
        p.y = ct.geo.origin[1] + j * ct.geo.spacing[1];
        p.z = ct.geo.origin[2] + k * ct.geo.spacing[2];
        const Tissue t = tissue_at(p, textures, r.anatomy);
        const size_t at = size_t((k * ny + j) * nx + i);
        ct.hu[at] = t.hu;
        ct.labels[at] = t.label;
      }

  // Partial volume, then noise that the reconstruction kernel correlates within each slice.
  for (int axis = 0; axis < 3; ++axis) smooth_axis(ct.hu, ct.extent, axis);
  if (scanner.thick_slices) smooth_axis(ct.hu, ct.extent, 0);
  Rng rng(mix_seed(r.seed, 3));
  for (float& v : ct.hu) v += scanner.noise_sigma * float(rng.normal());
  for (int pass = 0; pass < scanner.kernel_passes; ++pass) {
    smooth_axis(ct.hu, ct.extent, 1);
    smooth_axis(ct.hu, ct.extent, 2);
  }
  if (r.calibrate) {
    const float pivot = CtScanner::kSoftTissueHu;
    for (float& v : ct.hu) v = pivot + scanner.contrast * (v - pivot) + scanner.hu_offset;
  }
  for (float& v : ct.hu) v = std::clamp(std::round(v), -1024.f, 3071.f);
  return ct;
}

CtPhantom make_ct_phantom(const CtOptions& options) {
  options.validate();
  const int64_t n = options.size;
  PhantomRecipe r;
  r.extent = {n, n, n};
  r.spacing = {options.spacing_xy, options.spacing_xy, options.spacing_z};
  r.seed = domain_seed(options.seed, options.domain);
  if (options.domain != 0) {
    r.anatomy = AnatomyVariant::target_domain(options.seed, options.domain);
    r.scanner = CtScanner::target_domain(options.seed, options.domain);
    r.calibrate = true;
  }
  return render_ct_phantom(r);
}

}  // namespace tessera::sample
