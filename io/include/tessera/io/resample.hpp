#pragma once
// Volumes onto another voxel grid, as nnU-Net does before and after its network: the image
// onto a target spacing (linear or nearest), labels by nearest neighbour (class ids are never
// mixed), and a prediction back onto the input's own grid through its class probabilities
// (linear, then argmax). Resampling is ITK's, in physical space (LPS mm): oblique directions
// and non-zero origins are honoured, and positions outside the input take the nearest edge
// voxel's value (never zero, so borders are not darkened and the background class is not
// invented). ITK types stay in io/src. Thread safety: the functions are reentrant; a
// MemoryVolume may be read from many threads; a ResamplingProbabilitySink is not shared.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/image_source.hpp"

namespace tessera::io {

enum class Interpolation { kNearest, kLinear };

/// "nearest" | "linear"; throws tessera::Error("interpolation '<s>': expected nearest or linear").
Interpolation parse_interpolation(const std::string& s);
std::string to_string(Interpolation i);

/// A volume's voxel grid: extent (z, y, x) and geometry as in Georeference (spacing and
/// origin in ITK axis order x, y, z, LPS mm; direction 9 terms row-major). Always complete.
struct VolumeGrid {
  Index extent;
  Georeference geo;
  /// Extents equal and every spacing, origin and direction term equal within 1e-6 relative
  /// (|a − b| <= 1e-6 · max(1, |a|, |b|): absolute near zero, as a file's float32 header keeps them).
  bool operator==(const VolumeGrid& other) const;
};

/// The grid of `info`. Throws tessera::Error("<info.path>: ...") unless info is a volume
/// with a (z, y, x) extent of positive sizes and 3 spacing, 3 origin and 9 direction terms.
VolumeGrid grid_of(const ImageInfo& info);

/// The grid covering the same physical extent at `spacing` (x, y, z mm): same origin and
/// direction, size per axis max(1, round(n · s_old / s_new)), as nnU-Net computes it.
/// Throws tessera::Error naming the value unless there are 3 terms, each positive and finite,
/// and the resulting voxel count fits in memory addressing (int64).
VolumeGrid resampled_grid(const VolumeGrid& grid, const std::vector<double>& spacing);

/// The grid of the same voxels on identity direction (LPS: +x left, +y posterior, +z superior),
/// as nnU-Net's reorientation makes every case's array read the same way: each physical axis
/// takes the index axis closest to it (a permutation), with its spacing and size, and the origin
/// moves to the voxel nearest the −x, −y, −z corner. For a direction of axis flips and
/// permutations every voxel centre of `grid` is a voxel centre of the result (resampling onto
/// it is a reordering); an oblique direction is rounded to the nearest such one (resampling
/// then interpolates). A grid on identity direction is returned unchanged.
VolumeGrid axis_aligned_grid(const VolumeGrid& grid);

/// The box (z, y, x) of `grid`'s own voxels that `aligned`, a box of axis_aligned_grid(grid),
/// covers: its axis permutation and flips undone, so a region chosen in LPS order (a holdout
/// as training sees the case) reads the same voxels from the file. Programmer error (abort)
/// unless `aligned` lies inside the aligned grid's extent.
Box box_from_axis_aligned(const VolumeGrid& grid, const Box& aligned);

/// A multi-channel volume held in memory: `voxels` are (channels, z, y, x), x fastest, as
/// ImageSource::read returns them; info.extent is (z, y, x) and info.channels says how many.
/// The result of resample_volume; also a test double. Immutable, so safe to read concurrently.
class MemoryVolume final : public ImageSource {
 public:
  /// Programmer error (abort) unless info.extent is 3 positive sizes and voxels holds
  /// channels × z × y × x values.
  MemoryVolume(ImageInfo info, std::vector<float> voxels);

  const ImageInfo& info() const override { return info_; }
  /// Box axis order (z, y, x), inside the volume; result shape (channels, dz, dy, dx).
  Block<float> read(const Box& box) const override;
  const std::vector<float>& voxels() const { return voxels_; }

 private:
  ImageInfo info_;
  std::vector<float> voxels_;
};

/// `volume` (kind "volume", any number of channels, each resampled separately) onto `grid`
/// with ITK's ResampleImageFilter and a linear or nearest-neighbour interpolator; positions
/// outside the input take the nearest edge voxel's value. NaN (nodata) voxels stay NaN and,
/// with linear interpolation, spread to the output voxels whose neighbourhood holds them.
/// info() of the result: path, kind, format, channels and nodata of the input; extent and geo
/// of `grid`; data_type the input's for kNearest, "Float32" for kLinear (values in between).
/// Throws tessera::Error naming the input's path when it is not a volume (grid_of) or the
/// result does not fit in memory.
std::unique_ptr<MemoryVolume> resample_volume(const ImageSource& volume, const VolumeGrid& grid, Interpolation how);

/// uint8 labels (z, y, x, x fastest) on `from` onto `to` by nearest neighbour (ITK),
/// positions outside `from` taking the nearest edge label. Programmer error (abort) unless
/// labels holds from's voxel count.
std::vector<uint8_t> resample_labels(const std::vector<uint8_t>& labels, const VolumeGrid& from, const VolumeGrid& to);

/// Class probabilities (classes, z, y, x; x fastest) on `from` onto `to` and their argmax there,
/// as nnU-Net writes a case back onto its own grid: each class's probability resampled with
/// ITK's linear interpolation (outside `from`: the nearest edge voxel's), then per voxel the
/// class of the highest one (the lowest class on ties, as torch's argmax). Nearest-neighbour
/// labels widen a structure by up to half a network voxel on each side; interpolated
/// probabilities put its border where the probabilities cross. A voxel whose neighbourhood
/// holds a NaN (nodata) gets `nodata`. Programmer error (abort) unless probabilities holds
/// classes × from's voxel count, classes in 1..255.
std::vector<uint8_t> argmax_resampled(const std::vector<float>& probabilities, int classes, const VolumeGrid& from,
                                      const VolumeGrid& to, uint8_t nodata);

/// The sink of a model run on another grid than the input's when its class probabilities are
/// at hand: windows of probabilities (classes, z, y, x) on `from` kept in memory (classes ×
/// from's voxel count floats; unwritten voxels are nodata), and on commit() argmax_resampled
/// onto `to`, written into `inner` as one window of to's whole extent, then `inner` committed.
/// Without commit() nothing reaches `inner`. Not thread-safe: one writer.
class ResamplingProbabilitySink {
 public:
  ResamplingProbabilitySink(std::unique_ptr<LabelSink> inner, int classes, VolumeGrid from, VolumeGrid to,
                            uint8_t nodata);
  /// Box inside from's extent, probabilities shape (classes, box.size...); else programmer error.
  void write(const Box& box, const Block<float>& probabilities);
  void commit();

 private:
  std::unique_ptr<LabelSink> inner_;
  int classes_;
  VolumeGrid from_;
  VolumeGrid to_;
  uint8_t nodata_;
  std::vector<float> probabilities_;  // (classes, z, y, x) on from_
  bool committed_ = false;
};

}  // namespace tessera::io
