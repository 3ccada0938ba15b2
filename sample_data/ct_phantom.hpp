#pragma once
// A CT-like abdominal phantom in Hounsfield units: air, a body of fat, muscle and soft tissue
// with bowel gas, a spine with discs and ribs, lungs at the top, a liver on the patient's
// right, two contrast-enhanced kidneys posteriorly, aorta and vena cava, a patient table.
// Voxels are z-major with x fastest, extent (z, y, x); geometry is LPS millimetres with
// identity direction, so +x is the patient's left, +y posterior and +z superior.
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
  /// Throws tessera::Error naming the bad field.
  void validate() const;
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
};

/// Builds the phantom: clean anatomy, a mild blur (partial volume), gaussian noise correlated
/// in-plane (σ ≈ 15 HU after filtering). Organs span z ∈ [0.2, 0.95] (liver) and
/// [0.35, 0.9] (kidneys) of the volume, so the last quarter of z holds all classes.
CtPhantom make_ct_phantom(const CtOptions& options);

}  // namespace tessera::sample
