#pragma once
// Label overlay compositing, free of widgets and I/O so tests can check its pixels exactly.
// Inputs: an RGB image (QImage::Format_RGB32) and a label map of the same size (one uint8
// per pixel, row stride given). Output: a new RGB32 image where every drawn label pixel is
//   out = round((1 − α) · image + α · colour(label))   per channel,
// label 0 (background) and kNoDataLabel (255) transparent by default, hidden labels left as
// the image. Outline mode blends only boundary pixels: a pixel whose 4-neighbour inside the
// buffer carries another label (neighbours outside the buffer count as equal, so tile seams
// never draw false edges). Thread safety: pure functions, callable from any thread.
#include <array>
#include <cstdint>

#include <QImage>
#include <QString>

namespace tessera::gui {

struct OverlayStyle {
  float opacity = 0.5f;                ///< α in [0, 1]
  bool outline = false;                ///< blend only label boundaries
  int only_label = -1;                 ///< ≥ 0: draw this label alone ("show only selected")
  std::array<bool, 256> visible{};     ///< per label id; 0 and 255 off by default
  std::array<QRgb, 256> colors{};      ///< per label id, defaults from tessera::label_color

  OverlayStyle();
  bool draws(int label) const {
    return visible[static_cast<size_t>(label)] && (only_label < 0 || only_label == label);
  }
};

/// The blended colour of one pixel (exposed for tests and for the readout swatch).
QRgb blend(QRgb image, QRgb label_color, float opacity);

/// Composites `labels` (width × height, `stride` bytes per row) over `image`.
QImage composite_overlay(const QImage& image, const uint8_t* labels, int stride, const OverlayStyle& style);

/// Per-label pixel counts of a label buffer, added into `counts`.
void accumulate_label_counts(const uint8_t* labels, int64_t n, std::array<int64_t, 256>& counts);

}  // namespace tessera::gui
