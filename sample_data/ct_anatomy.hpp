#pragma once
// Private to the CT phantom: what tissue sits at one point. Positions come twice: normalised
// (u, v across the field of view in [−1, 1], u towards the patient's left, v posterior;
// w ∈ [0, 1] from the feet to the head) for the layout, and in millimetres for textures
// so they look isotropic whatever the spacing.
#include <cstdint>
#include <vector>

#include "ct_phantom.hpp"

#include "random.hpp"

namespace tessera::sample {

struct Tissue {
  float hu = -1000.f;
  uint8_t label = 0;
};

struct Point3 {
  double u, v, w;     // normalised layout coordinates
  double x, y, z;     // millimetres
};

/// Another patient: the body's size and where and how large the organs are, in normalised
/// units. The defaults are the source phantom, to the bit.
struct AnatomyVariant {
  double body_u = 1.0, body_v = 1.0;  ///< scale of the body outline across and front-back
  double liver_du = 0.0, liver_dv = 0.0, liver_dw = 0.0;  ///< shift of the liver
  double liver_scale = 1.0;
  double kidney_dv = 0.0;                      ///< both kidneys forwards (−) or back (+)
  double kidney_dw_right = 0.0, kidney_dw_left = 0.0;  ///< each kidney up (+) or down
  double kidney_scale = 1.0;

  /// How far a drawn patient may differ from the source phantom: body scale in [body_low,
  /// body_high] per axis, liver and kidney shifts in ±liver_shift, ±kidney_shift_v,
  /// ±kidney_shift_w, scales in [low, high].
  struct Ranges {
    double body_low, body_high;
    double liver_shift, liver_scale_low, liver_scale_high;
    double kidney_shift_v, kidney_shift_w, kidney_scale_low, kidney_scale_high;
  };
  /// A patient drawn from `rng` within `r` (always the same ten draws, in field order).
  static AnatomyVariant draw(Rng& rng, const Ranges& r);

  /// Patient k ∈ [1, kMaxTargetDomains], a pure function of (seed, k); small enough that the
  /// liver and both kidneys stay in the last quarter of z.
  static AnatomyVariant target_domain(uint64_t seed, int k);
};

/// Everything one phantom is made of: its voxel grid, its patient and its scanner.
struct PhantomRecipe {
  Index extent;                       ///< (z, y, x); the layout spans the whole field of view
  std::vector<double> spacing;        ///< (x, y, z) mm
  uint64_t seed = 0;                  ///< textures and noise
  AnatomyVariant anatomy;
  CtScanner scanner;
  bool calibrate = false;             ///< apply the scanner's contrast and offset (target domains)
};

/// The phantom of `r` on identity direction, volume centred on 0 (ct_phantom.hpp's CtPhantom).
CtPhantom render_ct_phantom(const PhantomRecipe& r);

/// The phantom's noise textures for one anatomy seed, built once and shared by every voxel.
struct AnatomyTextures {
  explicit AnatomyTextures(uint64_t seed);
  FractalNoise outline, subcutaneous_fat, bowel, visceral_fat, bowel_gas, lung, liver_outline,
      liver, kidney_outline, kidney, bone;
};

/// Deterministic in the textures' seed; a pure function of the point, so callers may evaluate
/// in any order.
Tissue tissue_at(const Point3& p, const AnatomyTextures& textures,
                 const AnatomyVariant& anatomy = {});

}  // namespace tessera::sample
