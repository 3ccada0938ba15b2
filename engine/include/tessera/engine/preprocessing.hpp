#pragma once
// What happens to an image before the network and to its labels after it, decided once per
// training run and stored in the checkpoint (CheckpointMeta::norm, ::resampling), so that
// `tessera infer` repeats it on every input:
//  - resampling: volumes reoriented to LPS (identity direction: axis flips and permutations
//    undone, io::axis_aligned_grid) and brought to one spacing (the training cases' median per
//    LPS axis by default, as nnU-Net), images linearly, labels by nearest neighbour; labels come
//    back onto each input's own grid and orientation;
//  - normalisation: by modality (core's Normalization; statistics in io/normalization.hpp).
// Rasters are never resampled here.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/engine/run_config.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/io/normalization.hpp"

namespace tessera::engine {

/// The checks that need no image (names, counts, ranges); throw tessera::Error naming `where`
/// and the key. choose_normalization / choose_resampling run them too.
void validate(const NormalizationConfig& config, const std::string& where);
void validate(const ResampleConfig& config, const std::string& where);

/// "CT", "MR" or "" for a volume: a DICOM series' Modality; other files say nothing.
std::string volume_modality(const ImageSource& image);

/// The normalisation `config` asks for, with its statistics computed over the `training`
/// regions: ct from their foreground, raster from the first image's bands, mr left to each
/// image. `modality` ("CT", "MR", a dataset's channel name, or "") decides kind auto for
/// volumes. `report`: one line saying what was chosen (and the statistics), for the run's
/// plan. Throws tessera::Error naming `where` (the config file) and the key.
Normalization choose_normalization(const NormalizationConfig& config, const std::vector<io::LabelledRegion>& training,
                                   const std::string& modality, const std::string& where, std::string& report);

/// The grid volumes run on: config.spacing, else the per-axis median of `images`' spacings
/// (per LPS axis, after reorientation);
/// disabled for rasters or when config.enabled is false. Throws naming `where` and the key.
VolumeResampling choose_resampling(const ResampleConfig& config, const std::vector<const ImageSource*>& images,
                                   const std::string& where);

/// `image` reoriented to identity direction and resampled to `resampling` (its `labels`
/// interpolation when `is_labels`, else its `image` one), or null when it already lies on that
/// grid, is a raster, or resampling is off (then a flipped volume is not reoriented either).
std::unique_ptr<ImageSource> to_network_grid(const ImageSource& image, const VolumeResampling& resampling,
                                             bool is_labels);

/// "1 × 1 × 1 mm (linear; labels nearest)" or "off".
std::string describe(const VolumeResampling& resampling);

}  // namespace tessera::engine
