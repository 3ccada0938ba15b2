#pragma once
// A CT/MR volume held in memory for the three slice views, with its optional label volume.
// Voxels are z-major with x fastest (index = (k·ny + j)·nx + i), as stored; geometry is ITK's
// (axes x, y, z; LPS millimetres). Slices are rendered radiologically whatever the direction
// matrix: each voxel axis is paired with the LPS axis its direction cosine is closest to
// (orient()), and the slices are cut and flipped along those, so axial shows anterior at the
// top, axial and coronal the patient's right on the screen's left, coronal and sagittal
// superior at the top, and sagittal anterior on the left. Voxel indices (the cursor, the
// readout) stay the stored ones.
// Thread safety: immutable after load_volume(); render_slice() may run on any thread.
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <QImage>
#include <QString>

#include "color_table.hpp"
#include "overlay_compositor.hpp"

namespace tessera::gui {

enum class Plane { Axial, Coronal, Sagittal };

struct VolumeData {
  std::string path, labels_path;
  int nx = 0, ny = 0, nz = 0;
  std::vector<float> voxels;
  std::vector<uint8_t> labels;  ///< empty without an overlay
  std::vector<double> spacing{1, 1, 1}, origin{0, 0, 0}, direction{1, 0, 0, 0, 1, 0, 0, 0, 1};
  float p_lo = 0, p_hi = 1;     ///< 1st / 99th percentile, default window when not CT
  bool looks_like_ct = false;   ///< minimum near −1024: HU
  /// DICOM Window Width / Center stored with the series (first slice), in the voxels' values
  /// (HU): the default window when there is one.
  bool has_stored_window = false;
  float stored_window = 0, stored_level = 0;
  QString source_note;          ///< DICOM: which series was read and how; empty otherwise
  std::array<int64_t, 256> counts{};
  QString label_message;        ///< why the labels were not loaded, if they were not
  /// Names and colours stored with the labels (a DICOM SEG's segments); absent for other formats.
  std::optional<LabelTable> label_table;

  /// For display axis d (0: towards the patient's left, 1: posterior, 2: superior) the voxel
  /// axis it runs along, and whether that voxel axis runs the other way (set by orient()).
  std::array<int, 3> axis{0, 1, 2};
  std::array<bool, 3> flip{false, false, false};
  void orient();
  int size(int voxel_axis) const { return voxel_axis == 0 ? nx : voxel_axis == 1 ? ny : nz; }
  int display_size(int d) const { return size(axis[size_t(d)]); }

  float at(int i, int j, int k) const { return voxels[(size_t(k) * ny + j) * nx + i]; }
  int label_at(int i, int j, int k) const { return labels.empty() ? -1 : labels[(size_t(k) * ny + j) * nx + i]; }
};

/// Loads image (and labels, may be empty) through tessera::io::VolumeReader; labels that are a
/// DICOM SEG are placed on the image's grid by io::read_dicom_seg (label = segment number,
/// names and colours in label_table). A label volume of another size, or a SEG made for
/// another series, is dropped with `label_message` set. Throws tessera::Error for the image.
std::shared_ptr<VolumeData> load_volume(const std::string& image, const std::string& labels);

/// Slice size in voxels (columns, rows) and the physical size of one pixel (mm).
QSize slice_size(const VolumeData& v, Plane plane);
QSizeF slice_pixel_mm(const VolumeData& v, Plane plane);
/// Number of slices along the plane's normal.
int slice_count(const VolumeData& v, Plane plane);
/// Voxel (i, j, k) of slice pixel (col, row) of slice `index`.
std::array<int, 3> slice_to_voxel(const VolumeData& v, Plane plane, int index, int col, int row);
/// Slice pixel (col, row) and slice index of voxel (i, j, k).
std::array<int, 3> voxel_to_slice(const VolumeData& v, Plane plane, int i, int j, int k);

/// Grey values mapped with window/level (centre `level`, width `window`), overlay blended.
QImage render_slice(const VolumeData& v, Plane plane, int index, float window, float level,
                    const OverlayStyle* overlay);

struct WindowPreset {
  const char* name;
  float window, level;
};
/// CT presets in Hounsfield units (editable in the viewer's spin boxes).
const std::vector<WindowPreset>& ct_window_presets();

}  // namespace tessera::gui
