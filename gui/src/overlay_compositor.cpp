#include "overlay_compositor.hpp"

#include <cmath>

#include "tessera/core/colors.hpp"
#include "tessera/core/image_source.hpp"

namespace tessera::gui {

OverlayStyle::OverlayStyle() {
  for (int i = 0; i < 256; ++i) {
    const Rgb c = label_color(i);
    colors[static_cast<size_t>(i)] = qRgb(c[0], c[1], c[2]);
    visible[static_cast<size_t>(i)] = i != 0 && i != kNoDataLabel;
  }
}

QRgb blend(QRgb image, QRgb label_color, float opacity) {
  const float a = std::clamp(opacity, 0.0f, 1.0f);
  auto mix = [a](int i, int l) { return static_cast<int>(std::lround((1.0f - a) * float(i) + a * float(l))); };
  return qRgb(mix(qRed(image), qRed(label_color)), mix(qGreen(image), qGreen(label_color)),
              mix(qBlue(image), qBlue(label_color)));
}

QImage composite_overlay(const QImage& image, const uint8_t* labels, int stride, const OverlayStyle& style) {
  QImage out = image.convertToFormat(QImage::Format_RGB32);
  if (!labels) return out;
  const int w = out.width(), h = out.height();
  // Per-label blend lookup: 256 labels × 256 image levels would be large; blend directly but
  // precompute α-scaled label colours once.
  const float a = std::clamp(style.opacity, 0.0f, 1.0f);
  std::array<bool, 256> draw{};
  for (int i = 0; i < 256; ++i) draw[static_cast<size_t>(i)] = style.draws(i);
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = labels + static_cast<ptrdiff_t>(y) * stride;
    const uint8_t* up = y > 0 ? row - stride : row;
    const uint8_t* down = y + 1 < h ? row + stride : row;
    auto* px = reinterpret_cast<QRgb*>(out.scanLine(y));
    for (int x = 0; x < w; ++x) {
      const uint8_t l = row[x];
      if (!draw[l]) continue;
      if (style.outline) {
        const bool edge = (x > 0 && row[x - 1] != l) || (x + 1 < w && row[x + 1] != l) || up[x] != l || down[x] != l;
        if (!edge) continue;
      }
      px[x] = blend(px[x], style.colors[l], a);
    }
  }
  return out;
}

void accumulate_label_counts(const uint8_t* labels, int64_t n, std::array<int64_t, 256>& counts) {
  for (int64_t i = 0; i < n; ++i) ++counts[labels[i]];
}

}  // namespace tessera::gui
