// The phantom's anatomy, painted back to front: body layers, then lungs, liver, kidneys,
// vessels and bone, each later structure replacing what lies under it.
#include <algorithm>
#include <cmath>

#include "ct_anatomy.hpp"
#include "ct_phantom.hpp"
#include "random.hpp"

namespace tessera::sample {
namespace {

constexpr double kTwoPi = 6.283185307179586;

double sq(double v) { return v * v; }

// Normalised radius of an axis-aligned ellipsoid; < 1 inside.
double ellipsoid(const Point3& p, double cu, double cv, double cw, double au, double av,
                 double aw) {
  return std::sqrt(sq((p.u - cu) / au) + sq((p.v - cv) / av) + sq((p.w - cw) / aw));
}

double ellipse(const Point3& p, double cu, double cv, double au, double av) {
  return std::sqrt(sq((p.u - cu) / au) + sq((p.v - cv) / av));
}

class Painter {
 public:
  Painter(const Point3& p, const AnatomyTextures& textures, const AnatomyVariant& anatomy)
      : p_(p), tx_(textures), a_(anatomy) {}

  float noise(const FractalNoise& texture) const { return texture(p_.x, p_.y, p_.z); }

  Tissue paint() {
    // Body: an elliptic cylinder whose outline breathes slowly along z.
    const double a = (0.86 + 0.03 * std::sin(kTwoPi * 1.1 * p_.w)) * a_.body_u;
    const double b = (0.70 + 0.02 * std::sin(kTwoPi * 0.8 * p_.w + 1.0)) * a_.body_v;
    const double e = ellipse(p_, 0.0, 0.0, a, b) + 0.03 * (noise(tx_.outline) - 0.5);
    if (e > 1.0) return table();
    if (e > 0.9) return {-105.f + 20.f * (noise(tx_.subcutaneous_fat) - 0.5f), kCtBackground};
    if (e > 0.82) return {rib(e) ? 600.f : 50.f, kCtBackground};
    t_ = interior();
    e_ = e;
    lungs();
    liver();
    kidneys();
    vessels();
    spine();
    return t_;
  }

 private:
  Tissue table() const {
    const double vt = 0.82 + 0.05 * sq(p_.u);
    const double d = std::abs(p_.v - vt);
    if (d < 0.03 && std::abs(p_.u) < 0.95) return {d > 0.018 ? 120.f : -400.f, kCtBackground};
    return {-1000.f, kCtBackground};
  }

  // Abdomen: bowel loops (with gas anteriorly) packed in visceral fat, so organs stand out
  // against fat as they do in real CT.
  Tissue interior() const {
    if (std::abs(p_.u) < 0.3 && p_.v > 0.35) return {55.f, kCtBackground};  // paraspinal muscle
    const float fat = smoothstep(0.47f, 0.57f, noise(tx_.visceral_fat));
    float hu = 25.f + 20.f * (noise(tx_.bowel) - 0.5f);
    if (p_.v < 0.1 && noise(tx_.bowel_gas) > 0.72f) hu = -750.f;
    return {hu + (-95.f - hu) * fat, kCtBackground};
  }

  void lungs() {
    const double grow = std::sqrt(std::clamp((p_.w - 0.72) / 0.15, 0.0, 1.0));
    if (grow <= 0.0) return;
    for (int side = -1; side <= 1; side += 2) {
      if (ellipse(p_, side * 0.40, 0.05, 0.30 * grow, 0.48 * grow) < 1.0 && e_ < 0.8)
        t_ = {-850.f + 60.f * (noise(tx_.lung) - 0.5f), kCtBackground};
    }
  }

  void liver() {
    const double du = a_.liver_du, dv = a_.liver_dv, dw = a_.liver_dw, s = a_.liver_scale;
    const double right =
        ellipsoid(p_, -0.36 + du, -0.08 + dv, 0.57 + dw, 0.42 * s, 0.40 * s, 0.375 * s);
    const double left =
        ellipsoid(p_, 0.12 + du, -0.30 + dv, 0.78 + dw, 0.32 * s, 0.20 * s, 0.16 * s);
    const double f = std::min(right, left) + 0.12 * (noise(tx_.liver_outline) - 0.5);
    if (e_ >= 0.8 || f >= 1.1) return;
    if (f >= 1.0) t_ = {-70.f, kCtBackground};  // a rim of fat around the liver
    else t_ = {64.f + 10.f * (noise(tx_.liver) - 0.5f), kLiver};
  }

  // Cortex brighter than medulla, a fat capsule around, the renal sinus opening medially.
  void kidneys() {
    for (int side = -1; side <= 1; side += 2) {
      const double s = a_.kidney_scale;
      const double cu = side * 0.40, cv = 0.36 + a_.kidney_dv,
                   cw = side < 0 ? 0.60 + a_.kidney_dw_right : 0.65 + a_.kidney_dw_left;
      const double f = ellipsoid(p_, cu, cv, cw, 0.14 * s, 0.17 * s, 0.25 * s) +
                       0.08 * (noise(tx_.kidney_outline) - 0.5);
      if (f >= 1.3 || e_ >= 0.82) continue;
      if (f >= 1.0) { t_ = {-90.f, kCtBackground}; continue; }
      if (ellipsoid(p_, cu - side * 0.09 * s, cv, cw, 0.06 * s, 0.07 * s, 0.12 * s) < 1.0) {
        t_ = {-40.f, kCtBackground};
        continue;
      }
      t_ = {(f > 0.7 ? 170.f : 135.f) + 10.f * (noise(tx_.kidney) - 0.5f), kKidney};
    }
  }

  void vessels() {
    if (ellipse(p_, 0.08, 0.12, 0.055, 0.055) < 1.0) t_ = {190.f, kCtBackground};  // aorta
    if (ellipse(p_, -0.10, 0.10, 0.065, 0.05) < 1.0) t_ = {130.f, kCtBackground};  // cava
  }

  void spine() {
    constexpr float kCortical = 800.f, kArch = 650.f;
    const bool disc = std::fmod(p_.z + 1000.0, 28.0) < 5.0;
    const double body = ellipse(p_, 0.0, 0.30, 0.12, 0.11);
    if (body < 1.0) {
      if (disc) t_ = {90.f, kCtBackground};
      else if (body > 0.85) t_ = {kCortical, kCtBackground};
      else t_ = {440.f + 160.f * (noise(tx_.bone) - 0.5f), kCtBackground};
      return;
    }
    const double canal = ellipse(p_, 0.0, 0.47, 0.05, 0.05);
    if (canal < 1.0) { t_ = {15.f, kCtBackground}; return; }
    if (disc) return;
    const bool arch = canal < 1.7 && p_.v > 0.42;
    const bool spinous = std::abs(p_.u) < 0.025 && p_.v > 0.5 && p_.v < 0.64;
    const bool transverse = std::abs(p_.v - 0.42) < 0.02 && std::abs(p_.u) < 0.17;
    if (arch || spinous || transverse) t_ = {kArch, kCtBackground};
  }

  // Ribs cross the muscle wall in the upper half, one every 20 mm of z, sloping down towards
  // the front so that an axial slice cuts them into arcs.
  bool rib(double e) const {
    return p_.w > 0.55 && p_.v > -0.4 && e > 0.83 && e < 0.88 &&
           std::fmod(p_.z + 25.0 * p_.v + 1000.0, 20.0) < 4.0;
  }

  Point3 p_;
  const AnatomyTextures& tx_;
  const AnatomyVariant& a_;
  Tissue t_;
  double e_ = 0.0;
};

}  // namespace

// Cells in millimetres; stream ids 201 … 211 as the phantom has always used.
AnatomyTextures::AnatomyTextures(uint64_t seed)
    : outline(30.0, 1, mix_seed(seed, 201)),
      subcutaneous_fat(6.0, 1, mix_seed(seed, 202)),
      bowel(6.0, 2, mix_seed(seed, 203)),
      visceral_fat(22.0, 2, mix_seed(seed, 204)),
      bowel_gas(9.0, 2, mix_seed(seed, 205)),
      lung(5.0, 2, mix_seed(seed, 206)),
      liver_outline(25.0, 2, mix_seed(seed, 207)),
      liver(4.0, 2, mix_seed(seed, 208)),
      kidney_outline(15.0, 1, mix_seed(seed, 209)),
      kidney(3.0, 1, mix_seed(seed, 210)),
      bone(3.0, 2, mix_seed(seed, 211)) {}

AnatomyVariant AnatomyVariant::draw(Rng& rng, const Ranges& r) {
  AnatomyVariant a;
  a.body_u = rng.uniform(r.body_low, r.body_high);
  a.body_v = rng.uniform(r.body_low, r.body_high);
  a.liver_du = rng.uniform(-r.liver_shift, r.liver_shift);
  a.liver_dv = rng.uniform(-r.liver_shift, r.liver_shift);
  a.liver_dw = rng.uniform(-r.liver_shift, r.liver_shift);
  a.liver_scale = rng.uniform(r.liver_scale_low, r.liver_scale_high);
  a.kidney_dv = rng.uniform(-r.kidney_shift_v, r.kidney_shift_v);
  a.kidney_dw_right = rng.uniform(-r.kidney_shift_w, r.kidney_shift_w);
  a.kidney_dw_left = rng.uniform(-r.kidney_shift_w, r.kidney_shift_w);
  a.kidney_scale = rng.uniform(r.kidney_scale_low, r.kidney_scale_high);
  return a;
}

AnatomyVariant AnatomyVariant::target_domain(uint64_t seed, int k) {
  Rng rng(mix_seed(domain_seed(seed, k), 60));
  return draw(rng, {.body_low = 0.93, .body_high = 1.05,
                    .liver_shift = 0.04, .liver_scale_low = 0.9, .liver_scale_high = 1.1,
                    .kidney_shift_v = 0.03, .kidney_shift_w = 0.04, .kidney_scale_low = 0.9, .kidney_scale_high = 1.1});
}

Tissue tissue_at(const Point3& p, const AnatomyTextures& textures,
                 const AnatomyVariant& anatomy) {
  return Painter(p, textures, anatomy).paint();
}

}  // namespace tessera::sample
