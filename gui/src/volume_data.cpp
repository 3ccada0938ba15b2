#include "volume_data.hpp"

#include <algorithm>
#include <cmath>

#include "tessera/core/error.hpp"
#include "tessera/io/dicom_seg.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::gui {

namespace {

// The label volume on the image's grid: a DICOM SEG placed frame by frame (its segments' names
// and colours kept), anything else read by VolumeReader and required to have the image's size.
void load_labels(VolumeData& v, const std::string& labels, const ImageInfo& info) {
  try {
    if (io::is_dicom_seg(labels)) {
      io::DicomSegLabels seg = io::read_dicom_seg(labels, info.extent, info.geo);
      v.labels = std::move(seg.labels);
      LabelTable table;
      for (const auto& s : seg.segments) {
        table.names[size_t(s.number)] = s.label;
        if (s.color) table.colors[size_t(s.number)] = qRgb((*s.color)[0], (*s.color)[1], (*s.color)[2]);
        ++table.entries;
      }
      v.label_table = table;
    } else {
      io::VolumeReader lr(labels);
      if (lr.info().extent != info.extent) {
        v.label_message = QString("%1: label volume is %2 but the image is %3; overlay not shown")
                              .arg(QString::fromStdString(labels), QString::fromStdString(to_string(lr.info().extent)),
                                   QString::fromStdString(to_string(info.extent)));
        return;
      }
      const auto l = lr.read(Box{{0, 0, 0}, info.extent}).data;
      v.labels.resize(l.size());
      for (size_t i = 0; i < l.size(); ++i)
        v.labels[i] = std::isfinite(l[i]) ? uint8_t(std::clamp(std::lround(l[i]), 0l, 255l)) : uint8_t(255);
    }
    accumulate_label_counts(v.labels.data(), int64_t(v.labels.size()), v.counts);
    v.labels_path = labels;
  } catch (const std::exception& e) {
    v.label_message = QString::fromStdString(e.what());
  }
}

}  // namespace

std::shared_ptr<VolumeData> load_volume(const std::string& image, const std::string& labels) {
  auto v = std::make_shared<VolumeData>();
  io::VolumeReader reader(image);
  const ImageInfo& info = reader.info();
  if (info.extent.size() != 3) throw Error(image + ": not a 3-D volume");
  v->path = image;
  v->nz = int(info.extent[0]);
  v->ny = int(info.extent[1]);
  v->nx = int(info.extent[2]);
  if (info.geo.spacing.size() == 3) v->spacing = info.geo.spacing;
  if (info.geo.origin.size() == 3) v->origin = info.geo.origin;
  if (info.geo.direction.size() == 9) v->direction = info.geo.direction;
  v->orient();
  v->voxels = reader.read(Box{{0, 0, 0}, info.extent}).data;
  if (const auto& dicom = reader.dicom()) {
    v->source_note = QString::fromStdString("DICOM series " + io::describe(dicom->series) + ": " + dicom->how);
    if (dicom->window) {
      v->has_stored_window = true;
      v->stored_window = float(dicom->window->width);
      v->stored_level = float(dicom->window->center);
    }
  }
  std::vector<float> sample;
  for (size_t i = 0; i < v->voxels.size(); i += std::max<size_t>(1, v->voxels.size() / 200000))
    if (std::isfinite(v->voxels[i])) sample.push_back(v->voxels[i]);
  if (!sample.empty()) {
    std::sort(sample.begin(), sample.end());
    v->p_lo = sample[sample.size() / 100];
    v->p_hi = sample[sample.size() * 99 / 100];
    // Without a Modality to go by: a minimum near air's −1000 HU (or a scanner's padding).
    v->looks_like_ct = sample.front() <= -900 && sample.front() >= -3100;
    if (!(v->p_hi > v->p_lo)) v->p_hi = v->p_lo + 1;
  }
  // DICOM says what it is: a CT slice whose field holds no air is still in HU (the rescale
  // is applied on reading), an MR whose minimum happens to be low is not.
  if (const auto& dicom = reader.dicom(); dicom && !dicom->series.modality.empty())
    v->looks_like_ct = dicom->series.modality == "CT";
  if (!labels.empty()) load_labels(*v, labels, info);
  return v;
}

void VolumeData::orient() {
  // Pair voxel axes with LPS axes by the largest direction cosines first, so an oblique
  // volume goes to the nearest LPS axis, and each pairing is used once.
  std::array<bool, 3> voxel_used{}, lps_used{};
  for (int pairs = 0; pairs < 3; ++pairs) {
    int best_r = -1, best_c = -1;
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c)
        if (!lps_used[size_t(r)] && !voxel_used[size_t(c)] &&
            (best_r < 0 || std::abs(direction[size_t(r * 3 + c)]) > std::abs(direction[size_t(best_r * 3 + best_c)])))
          best_r = r, best_c = c;
    lps_used[size_t(best_r)] = voxel_used[size_t(best_c)] = true;
    axis[size_t(best_r)] = best_c;
    flip[size_t(best_r)] = direction[size_t(best_r * 3 + best_c)] < 0;
  }
}

namespace {

// Display index (x: towards the patient's left, y: posterior, z: superior) of a voxel, and back.
std::array<int, 3> to_display(const VolumeData& v, std::array<int, 3> voxel) {
  std::array<int, 3> e{};
  for (size_t d = 0; d < 3; ++d) {
    const int a = v.axis[d];
    e[d] = v.flip[d] ? v.size(a) - 1 - voxel[size_t(a)] : voxel[size_t(a)];
  }
  return e;
}

std::array<int, 3> from_display(const VolumeData& v, std::array<int, 3> e) {
  std::array<int, 3> voxel{};
  for (size_t d = 0; d < 3; ++d) {
    const int a = v.axis[d];
    voxel[size_t(a)] = v.flip[d] ? v.size(a) - 1 - e[d] : e[d];
  }
  return voxel;
}

}  // namespace

QSize slice_size(const VolumeData& v, Plane plane) {
  switch (plane) {
    case Plane::Axial: return {v.display_size(0), v.display_size(1)};
    case Plane::Coronal: return {v.display_size(0), v.display_size(2)};
    case Plane::Sagittal: return {v.display_size(1), v.display_size(2)};
  }
  return {};
}

QSizeF slice_pixel_mm(const VolumeData& v, Plane plane) {
  const auto mm = [&](int d) { return v.spacing[size_t(v.axis[size_t(d)])]; };
  switch (plane) {
    case Plane::Axial: return {mm(0), mm(1)};
    case Plane::Coronal: return {mm(0), mm(2)};
    case Plane::Sagittal: return {mm(1), mm(2)};
  }
  return {};
}

int slice_count(const VolumeData& v, Plane plane) {
  switch (plane) {
    case Plane::Axial: return v.display_size(2);
    case Plane::Coronal: return v.display_size(1);
    case Plane::Sagittal: return v.display_size(0);
  }
  return 0;
}

std::array<int, 3> slice_to_voxel(const VolumeData& v, Plane plane, int index, int col, int row) {
  const int top = v.display_size(2) - 1;  // superior at the top
  switch (plane) {
    case Plane::Axial: return from_display(v, {col, row, index});
    case Plane::Coronal: return from_display(v, {col, index, top - row});
    case Plane::Sagittal: return from_display(v, {index, col, top - row});
  }
  return {};
}

std::array<int, 3> voxel_to_slice(const VolumeData& v, Plane plane, int i, int j, int k) {
  const auto e = to_display(v, {i, j, k});
  const int top = v.display_size(2) - 1;
  switch (plane) {
    case Plane::Axial: return {e[0], e[1], e[2]};
    case Plane::Coronal: return {e[0], top - e[2], e[1]};
    case Plane::Sagittal: return {e[1], top - e[2], e[0]};
  }
  return {};
}

QImage render_slice(const VolumeData& v, Plane plane, int index, float window, float level,
                    const OverlayStyle* overlay) {
  const QSize s = slice_size(v, plane);
  QImage img(s, QImage::Format_RGB32);
  std::vector<uint8_t> lab;
  if (overlay && !v.labels.empty()) lab.resize(size_t(s.width()) * size_t(s.height()));
  const float lo = level - window / 2, scale = 255.0f / std::max(window, 1e-6f);
  for (int row = 0; row < s.height(); ++row) {
    auto* px = reinterpret_cast<QRgb*>(img.scanLine(row));
    for (int col = 0; col < s.width(); ++col) {
      const auto [i, j, k] = slice_to_voxel(v, plane, index, col, row);
      const float x = v.at(i, j, k);
      const int g = std::isfinite(x) ? std::clamp(int((x - lo) * scale + 0.5f), 0, 255) : 0;
      px[col] = qRgb(g, g, g);
      if (!lab.empty()) lab[size_t(row) * size_t(s.width()) + size_t(col)] = uint8_t(v.label_at(i, j, k));
    }
  }
  if (lab.empty()) return img;
  return composite_overlay(img, lab.data(), s.width(), *overlay);
}

const std::vector<WindowPreset>& ct_window_presets() {
  static const std::vector<WindowPreset> presets = {
      {"Brain", 80, 40}, {"Lung", 1500, -600}, {"Bone", 1800, 400}, {"Abdomen", 400, 50}, {"Soft tissue", 350, 40},
  };
  return presets;
}

}  // namespace tessera::gui
