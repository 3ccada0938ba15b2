#pragma once
// The cases of the harder MSD dataset (`tessera-make-sample --msd DIR --hard`): every case
// another patient on another scanner, with its own voxel grid and orientation, as the cases of
// a real multi-centre dataset differ:
//   - spacing: in-plane s = (115.2 / ct_size) · U(0.8, 1.25) mm; between slices s · r with
//     r one of 1, 1.5, 2, 2.5, 3, 4 (every case anisotropic from r = 1.5);
//   - field of view: 115.2 · U(0.95, 1.1) mm across, 256 · U(0.9, 1.1) mm along z, so the
//     voxel counts differ per axis and per case;
//   - orientation: axis flips in the direction cosines (x for odd cases, y for case % 3 == 2,
//     z for case % 4 == 3), the voxels stored in that order; the anatomy in LPS mm is unflipped;
//   - scanner: contrast (gain) 0.85 … 1.2, offset −30 … +60 HU, noise after the kernel
//     8 … 30 HU, a soft or standard kernel, thick-slice blur when r ≥ 3;
//   - patient: body 0.9 … 1.08 across and front-back, liver shifted by up to 0.06 and scaled
//     0.85 … 1.15, kidneys shifted by up to 0.04 / 0.06 and scaled 0.85 … 1.2, own textures.
// A pure function of (seed, case index, ct_size): same arguments, same voxels.
#include <cstdint>
#include <string>

#include "ct_phantom.hpp"

namespace tessera::sample {

/// Case `index` (0, 1, …) of the hard dataset for `seed`, about `ct_size` voxels across.
/// Its geo has the case's flips in geo.direction (diagonal ±1) and the origin that keeps
/// every voxel where the unflipped phantom had it.
CtPhantom make_hard_ct_case(uint64_t seed, int index, int ct_size);

/// "spacing 0.84 x 0.84 x 2.52 mm, flipped x z, …": what makes the case differ.
std::string describe_hard_case(const CtPhantom& ct);

}  // namespace tessera::sample
