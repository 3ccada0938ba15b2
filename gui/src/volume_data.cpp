#include "volume_data.hpp"

#include <algorithm>
#include <cmath>

#include "tessera/core/error.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::gui {

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
    v->looks_like_ct = sample.front() <= -900 && sample.front() >= -3100;
    if (!(v->p_hi > v->p_lo)) v->p_hi = v->p_lo + 1;
  }
  if (!labels.empty()) {
    try {
      io::VolumeReader lr(labels);
      if (lr.info().extent != info.extent) {
        v->label_message = QString("%1: label volume is %2 but the image is %3; overlay not shown")
                               .arg(QString::fromStdString(labels), QString::fromStdString(to_string(lr.info().extent)),
                                    QString::fromStdString(to_string(info.extent)));
      } else {
        const auto l = lr.read(Box{{0, 0, 0}, info.extent}).data;
        v->labels.resize(l.size());
        for (size_t i = 0; i < l.size(); ++i)
          v->labels[i] = std::isfinite(l[i]) ? uint8_t(std::clamp(std::lround(l[i]), 0l, 255l)) : uint8_t(255);
        accumulate_label_counts(v->labels.data(), int64_t(v->labels.size()), v->counts);
        v->labels_path = labels;
      }
    } catch (const std::exception& e) {
      v->label_message = QString::fromStdString(e.what());
    }
  }
  return v;
}

QSize slice_size(const VolumeData& v, Plane plane) {
  switch (plane) {
    case Plane::Axial: return {v.nx, v.ny};
    case Plane::Coronal: return {v.nx, v.nz};
    case Plane::Sagittal: return {v.ny, v.nz};
  }
  return {};
}

QSizeF slice_pixel_mm(const VolumeData& v, Plane plane) {
  switch (plane) {
    case Plane::Axial: return {v.spacing[0], v.spacing[1]};
    case Plane::Coronal: return {v.spacing[0], v.spacing[2]};
    case Plane::Sagittal: return {v.spacing[1], v.spacing[2]};
  }
  return {};
}

int slice_count(const VolumeData& v, Plane plane) {
  switch (plane) {
    case Plane::Axial: return v.nz;
    case Plane::Coronal: return v.ny;
    case Plane::Sagittal: return v.nx;
  }
  return 0;
}

std::array<int, 3> slice_to_voxel(const VolumeData& v, Plane plane, int index, int col, int row) {
  switch (plane) {
    case Plane::Axial: return {col, row, index};
    case Plane::Coronal: return {col, index, v.nz - 1 - row};
    case Plane::Sagittal: return {index, col, v.nz - 1 - row};
  }
  return {};
}

std::array<int, 3> voxel_to_slice(const VolumeData& v, Plane plane, int i, int j, int k) {
  switch (plane) {
    case Plane::Axial: return {i, j, k};
    case Plane::Coronal: return {i, v.nz - 1 - k, j};
    case Plane::Sagittal: return {j, v.nz - 1 - k, i};
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
