#include "tessera/engine/overlay.hpp"

#include <algorithm>
#include <array>
#include <memory>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "tessera/core/colors.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/dicom_seg.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/io/resample.hpp"

namespace tessera::engine {
namespace {

// Stretches one channel plane to 0..255 between its 2nd and 98th percentiles (NaN → 0).
cv::Mat stretch(const float* plane, int h, int w) {
  std::vector<float> finite;
  finite.reserve(size_t(h) * w);
  for (int i = 0; i < h * w; ++i)
    if (std::isfinite(plane[i])) finite.push_back(plane[i]);
  float lo = 0, hi = 1;
  if (!finite.empty()) {
    auto at = [&](double q) {
      auto it = finite.begin() + static_cast<long>(q * double(finite.size() - 1));
      std::nth_element(finite.begin(), it, finite.end());
      return *it;
    };
    lo = at(0.02);
    hi = at(0.98);
  }
  if (hi <= lo) hi = lo + 1;
  cv::Mat out(h, w, CV_8U);
  for (int i = 0; i < h * w; ++i) {
    const float v = std::isfinite(plane[i]) ? (plane[i] - lo) / (hi - lo) : 0.f;
    out.data[i] = static_cast<uint8_t>(std::clamp(v, 0.f, 1.f) * 255.f + 0.5f);
  }
  return out;
}

cv::Mat blend(const cv::Mat& bgr, const float* labels, const io::LabelStyle& style, double opacity) {
  cv::Mat out = bgr.clone();
  for (int i = 0; i < bgr.rows * bgr.cols; ++i) {
    const float l = labels[i];
    if (!std::isfinite(l) || l < 0 || l >= kNoDataLabel || style.is_background(static_cast<int>(l))) continue;
    const Rgb c = style.color(static_cast<int>(l));
    uint8_t* p = out.data + 3 * i;
    for (int k = 0; k < 3; ++k)
      p[k] = static_cast<uint8_t>((1 - opacity) * p[k] + opacity * c[2 - k] + 0.5);  // BGR
  }
  return out;
}

// One plane of a volume (a Box one voxel thick), soft-tissue window (W 400, L 40), labels
// blended, drawn at its physical aspect (`row_mm`, `col_mm`) and flipped so that z rises upwards.
cv::Mat volume_plane(const ImageSource& image, const ImageSource& labels, const Box& box, int rows, int cols,
                     double row_mm, double col_mm, bool z_rows, const io::LabelStyle& style, double opacity) {
  const Block<float> img = image.read(box), lab = labels.read(box);
  cv::Mat grey(rows, cols, CV_8U);
  for (size_t i = 0; i < img.data.size(); ++i)
    grey.data[i] = static_cast<uint8_t>(std::clamp((img.data[i] - (40.f - 200.f)) / 400.f, 0.f, 1.f) * 255.f);
  cv::Mat bgr;
  cv::cvtColor(grey, bgr, cv::COLOR_GRAY2BGR);
  cv::Mat out = blend(bgr, lab.data.data(), style, opacity);
  if (z_rows) cv::flip(out, out, 0);
  const double scale = std::min(row_mm, col_mm);
  cv::resize(out, out, cv::Size(std::max(1, int(cols * col_mm / scale + 0.5)), std::max(1, int(rows * row_mm / scale + 0.5))),
             0, 0, cv::INTER_NEAREST);
  return out;
}

// The middle axial, coronal and sagittal planes side by side.
cv::Mat volume_planes(const ImageSource& image, const ImageSource& labels, const io::LabelStyle& style, double opacity) {
  const Index& e = image.info().extent;  // (z, y, x)
  std::vector<double> sp = image.info().geo.spacing;  // (x, y, z)
  if (sp.size() != 3) sp = {1, 1, 1};
  const cv::Mat axial = volume_plane(image, labels, {{e[0] / 2, 0, 0}, {1, e[1], e[2]}}, int(e[1]), int(e[2]), sp[1],
                                     sp[0], false, style, opacity);
  const cv::Mat coronal = volume_plane(image, labels, {{0, e[1] / 2, 0}, {e[0], 1, e[2]}}, int(e[0]), int(e[2]), sp[2],
                                       sp[0], true, style, opacity);
  const cv::Mat sagittal = volume_plane(image, labels, {{0, 0, e[2] / 2}, {e[0], e[1], 1}}, int(e[0]), int(e[1]), sp[2],
                                        sp[1], true, style, opacity);
  const int height = std::max({axial.rows, coronal.rows, sagittal.rows}), gap = 8;
  cv::Mat out(height, axial.cols + coronal.cols + sagittal.cols + 2 * gap, CV_8UC3, cv::Scalar(0, 0, 0));
  int x = 0;
  for (const cv::Mat* m : {&axial, &coronal, &sagittal}) {
    m->copyTo(out(cv::Rect(x, 0, m->cols, m->rows)));
    x += m->cols + gap;
  }
  return out;
}

// A legend to the right of `picture`: a swatch and the name of every class (the background
// says it is not drawn).
cv::Mat with_legend(const cv::Mat& picture, const io::LabelStyle& style) {
  const int classes = std::max(style.classes, static_cast<int>(style.class_names.size()));
  const int line = 22, width = 240, rows = std::max(picture.rows, 8 + line * classes);
  cv::Mat out(rows, picture.cols + width, CV_8UC3, cv::Scalar(255, 255, 255));
  picture.copyTo(out(cv::Rect(0, 0, picture.cols, picture.rows)));
  for (int id = 0; id < classes; ++id) {
    const Rgb c = style.color(id);
    const int y = 8 + line * id;
    cv::rectangle(out, cv::Rect(picture.cols + 8, y, 16, 16), cv::Scalar(c[2], c[1], c[0]), cv::FILLED);
    cv::rectangle(out, cv::Rect(picture.cols + 8, y, 16, 16), cv::Scalar(60, 60, 60), 1);
    const std::string text = std::to_string(id) + " " + style.name(id) + (style.is_background(id) ? " (not drawn)" : "");
    cv::putText(out, text, cv::Point(picture.cols + 30, y + 13), cv::FONT_HERSHEY_SIMPLEX, 0.45, cv::Scalar(20, 20, 20),
                1, cv::LINE_AA);
  }
  return out;
}

// The labels to draw: a label raster or volume as it is; a DICOM SEG (`tessera infer --output
// seg.dcm`) placed on `image`'s grid by DCMTK (never read as an image: GDCM takes a SEG for an
// image it cannot read), each segment back to the class whose name it bears (DicomSegWriter
// writes one segment per class, labelled with its name); voxels in no segment are class 0, or
// nodata where class 0 is a class with a segment of its own (data.background: none).
std::unique_ptr<ImageSource> labels_of(const std::string& path, const ImageSource& image, const io::LabelStyle& style) {
  if (!io::is_dicom_seg(path)) return io::open_image(path);
  const io::DicomSegLabels seg = io::read_dicom_seg(path, image.info().extent, image.info().geo);
  std::array<float, 256> class_of;
  class_of.fill(float(kNoDataLabel));
  class_of[0] = style.is_background(0) ? 0.f : float(kNoDataLabel);
  const int classes = std::max(style.classes, static_cast<int>(style.class_names.size()));
  for (const io::DicomSegSegment& segment : seg.segments) {
    int id = 0;
    while (id < classes && style.name(id) != segment.label) ++id;
    if (id == classes)
      throw Error(path + ": segment " + std::to_string(segment.number) + " '" + segment.label + "' names no class");
    class_of[size_t(segment.number)] = float(id);
  }
  ImageInfo info = image.info();
  info.path = path;
  info.channels = 1;
  std::vector<float> voxels(seg.labels.size());
  for (size_t i = 0; i < voxels.size(); ++i) voxels[i] = class_of[seg.labels[i]];
  return std::make_unique<io::MemoryVolume>(std::move(info), std::move(voxels));
}

}  // namespace

void write_overlay_png(const std::string& image_path, const std::string& labels_path, const std::string& png,
                       const io::LabelStyle& style, double opacity, int max_side) {
  auto image = io::open_image(image_path);
  auto labels = labels_of(labels_path, *image, style);
  if (image->info().extent != labels->info().extent)
    throw Error(labels_path + ": size " + to_string(labels->info().extent) + " differs from " + image_path);
  cv::Mat picture;
  if (const auto* raster = dynamic_cast<const io::RasterReader*>(image.get())) {
    const Block<float> img = raster->read_preview(max_side);
    const Block<float> lab = dynamic_cast<const io::RasterReader&>(*labels).read_preview(max_side, /*nearest=*/true);
    const int h = int(img.shape[1]), w = int(img.shape[2]);
    std::vector<cv::Mat> bgr_planes;
    const int c = int(img.shape[0]);
    for (int k : {2, 1, 0}) bgr_planes.push_back(stretch(img.data.data() + size_t(std::min(k, c - 1)) * h * w, h, w));
    cv::Mat bgr;
    cv::merge(bgr_planes, bgr);
    picture = blend(bgr, lab.data.data(), style, opacity);
  } else {
    picture = volume_planes(*image, *labels, style, opacity);
  }
  if (!cv::imwrite(png, with_legend(picture, style))) throw Error(png + ": cannot write PNG");
}

}  // namespace tessera::engine
