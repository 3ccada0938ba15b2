#pragma once
// A CT-like abdominal phantom in Hounsfield units: air, a body of fat, muscle and soft tissue
// with bowel gas, a spine with discs and ribs, lungs at the top, a liver on the patient's
// right, two contrast-enhanced kidneys posteriorly, aorta and vena cava, a patient table.
// Voxels are z-major with x fastest, extent (z, y, x); geometry is LPS millimetres with
// identity direction, so +x is the patient's left, +y posterior and +z superior.
// Domain 0 is the source; domain k ≥ 1 (domain adaptation) is another patient on another
// scanner: same voxel grid and classes, other anatomy and a different CtScanner.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/image_source.hpp"

namespace tessera::sample {

struct CtOptions {
  int size = 128;       ///< voxels along x, y and z
  uint64_t seed = 7;    ///< same seed, same voxels
  double spacing_xy = 0.9;  ///< mm
  double spacing_z = 2.0;   ///< mm
  int domain = 0;  ///< 0 source; 1 … kMaxTargetDomains: target patient and scanner
  /// Throws tessera::Error naming the bad field.
  void validate() const;
};

/// How a scanner reconstructs and calibrates. Clean anatomy → (1 2 1) blur on every axis
/// (partial volume) → `thick_slices`: one more along z → white noise σ = noise_sigma →
/// `kernel_passes` × (1 2 1) in-plane (the reconstruction kernel; it smooths image and noise)
/// → HU' = kSoftTissueHu + contrast · (HU − kSoftTissueHu) + hu_offset → round, clamp.
/// The defaults are the source scanner (≈ 15 HU noise after the kernel).
struct CtScanner {
  static constexpr float kSoftTissueHu = 40.f;
  float hu_offset = 0.f;
  float contrast = 1.f;
  float noise_sigma = 40.f;  ///< HU before the kernel
  int kernel_passes = 1;     ///< 2: a softer kernel, smoother image, less noise
  bool thick_slices = false;

  /// Scanner k ∈ [1, kMaxTargetDomains], a pure function of (seed, k): offset +40 … +80 HU,
  /// contrast 0.8 … 1.25 (above 1 for odd k, below for even k), noise after the kernel
  /// 8 … 12 HU (even k, soft kernel) or 20 … 35 HU (odd k, thick slices from k = 3).
  static CtScanner target_domain(uint64_t seed, int k);
  /// Standard deviation of the noise in the written volume, HU.
  double output_noise() const;
  std::string describe() const;
};

/// Label ids in ct_labels: both kidneys share one id.
enum CtClass : uint8_t { kCtBackground = 0, kLiver = 1, kKidney = 2 };
inline constexpr int kCtClassCount = 3;
const std::vector<std::string>& ct_class_names();

struct CtPhantom {
  Index extent;                 ///< (z, y, x)
  Georeference geo;             ///< spacing, origin (volume centred on 0), identity direction
  std::vector<float> hu;        ///< whole Hounsfield units, clamped to [−1024, 3071]
  std::vector<uint8_t> labels;  ///< CtClass per voxel
  CtScanner scanner;            ///< the scanner that made `hu`
};

/// Builds the phantom: clean anatomy, a mild blur (partial volume), gaussian noise correlated
/// in-plane (σ ≈ 15 HU after filtering). Organs span z ∈ [0.2, 0.95] (liver) and
/// [0.35, 0.9] (kidneys) of the volume, so the last quarter of z holds all classes.
CtPhantom make_ct_phantom(const CtOptions& options);

}  // namespace tessera::sample
