#include "tessera/engine/overlay.hpp"

#include <algorithm>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "tessera/core/colors.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/raster.hpp"

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

cv::Mat blend(const cv::Mat& bgr, const float* labels, double opacity) {
  cv::Mat out = bgr.clone();
  for (int i = 0; i < bgr.rows * bgr.cols; ++i) {
    const float l = labels[i];
    if (!std::isfinite(l) || l <= 0 || l >= kNoDataLabel) continue;
    const Rgb c = label_color(static_cast<int>(l));
    uint8_t* p = out.data + 3 * i;
    for (int k = 0; k < 3; ++k)
      p[k] = static_cast<uint8_t>((1 - opacity) * p[k] + opacity * c[2 - k] + 0.5);  // BGR
  }
  return out;
}

}  // namespace

void write_overlay_png(const std::string& image_path, const std::string& labels_path, const std::string& png,
                       double opacity, int max_side) {
  auto image = io::open_image(image_path);
  auto labels = io::open_image(labels_path);
  if (image->info().extent != labels->info().extent)
    throw Error(labels_path + ": size " + to_string(labels->info().extent) + " differs from " + image_path);
  cv::Mat bgr;
  Block<float> lab;
  if (const auto* raster = dynamic_cast<const io::RasterReader*>(image.get())) {
    const Block<float> img = raster->read_preview(max_side);
    lab = dynamic_cast<const io::RasterReader&>(*labels).read_preview(max_side, /*nearest=*/true);
    const int h = int(img.shape[1]), w = int(img.shape[2]);
    std::vector<cv::Mat> bgr_planes;
    const int c = int(img.shape[0]);
    for (int k : {2, 1, 0}) bgr_planes.push_back(stretch(img.data.data() + size_t(std::min(k, c - 1)) * h * w, h, w));
    cv::merge(bgr_planes, bgr);
  } else {
    // Volumes: the middle axial slice, soft-tissue window (W 400, L 40).
    const Index& ext = image->info().extent;
    const Box slice{{ext[0] / 2, 0, 0}, {1, ext[1], ext[2]}};
    const Block<float> img = image->read(slice);
    lab = labels->read(slice);
    cv::Mat grey(static_cast<int>(ext[1]), static_cast<int>(ext[2]), CV_8U);
    for (size_t i = 0; i < img.data.size(); ++i)
      grey.data[i] = static_cast<uint8_t>(std::clamp((img.data[i] - (40.f - 200.f)) / 400.f, 0.f, 1.f) * 255.f);
    cv::cvtColor(grey, bgr, cv::COLOR_GRAY2BGR);
  }
  cv::Mat out = blend(bgr, lab.data.data(), opacity);
  if (!cv::imwrite(png, out)) throw Error(png + ": cannot write PNG");
}

}  // namespace tessera::engine
