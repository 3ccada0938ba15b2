// Pixel checks of the pure overlay compositor: blended colour, outline, visibility.
#include <gtest/gtest.h>

#include <cmath>

#include "overlay_compositor.hpp"
#include "tessera/core/colors.hpp"

namespace tessera::gui {
namespace {

constexpr QRgb kImage = 0xFF6496C8;  // (100, 150, 200)

// Independent of blend(): the formula of the contract, per channel.
QRgb expected(QRgb img, int label, double alpha) {
  const Rgb c = label_color(label);
  auto mix = [&](int i, int l) { return int(std::lround((1 - alpha) * i + alpha * l)); };
  return qRgb(mix(qRed(img), c[0]), mix(qGreen(img), c[1]), mix(qBlue(img), c[2]));
}

struct Scene {
  QImage image{8, 8, QImage::Format_RGB32};
  std::vector<uint8_t> labels = std::vector<uint8_t>(64, 0);
  Scene() {
    image.fill(kImage);
    for (int y = 2; y < 6; ++y)
      for (int x = 2; x < 6; ++x) labels[size_t(y * 8 + x)] = 2;  // a 4×4 block of label 2
    labels[0] = 255;                                               // nodata corner
    labels[7] = 1;
  }
  QImage run(const OverlayStyle& s) const { return composite_overlay(image, labels.data(), 8, s); }
};

TEST(OverlayCompositor, PixelHasBlendedColourForLabelAndOpacity) {
  Scene scene;
  for (double alpha : {0.5, 0.3, 1.0}) {
    OverlayStyle s;
    s.opacity = float(alpha);
    const QImage out = scene.run(s);
    EXPECT_EQ(out.pixel(3, 3), expected(kImage, 2, alpha)) << "alpha " << alpha;
    EXPECT_EQ(out.pixel(7, 0), expected(kImage, 1, alpha));
  }
}

TEST(OverlayCompositor, BackgroundAndNodataAreTransparent) {
  Scene scene;
  const QImage out = scene.run(OverlayStyle{});
  EXPECT_EQ(out.pixel(1, 1), kImage);  // label 0
  EXPECT_EQ(out.pixel(0, 0), kImage);  // label 255
}

TEST(OverlayCompositor, OutlineModeLeavesInteriorUnblended) {
  Scene scene;
  OverlayStyle s;
  s.outline = true;
  const QImage out = scene.run(s);
  EXPECT_EQ(out.pixel(3, 3), kImage);                       // interior
  EXPECT_EQ(out.pixel(4, 4), kImage);                       // interior
  EXPECT_EQ(out.pixel(2, 2), expected(kImage, 2, 0.5));     // corner of the block
  EXPECT_EQ(out.pixel(5, 3), expected(kImage, 2, 0.5));     // right edge
  EXPECT_EQ(out.pixel(1, 3), kImage);                       // background next to it
}

TEST(OverlayCompositor, HiddenLabelIsNotDrawn) {
  Scene scene;
  OverlayStyle s;
  s.visible[2] = false;
  const QImage out = scene.run(s);
  EXPECT_EQ(out.pixel(3, 3), kImage);
  EXPECT_EQ(out.pixel(7, 0), expected(kImage, 1, 0.5));  // others still drawn
}

TEST(OverlayCompositor, ShowOnlySelectedDrawsThatLabelAlone) {
  Scene scene;
  OverlayStyle s;
  s.only_label = 1;
  const QImage out = scene.run(s);
  EXPECT_EQ(out.pixel(3, 3), kImage);
  EXPECT_EQ(out.pixel(7, 0), expected(kImage, 1, 0.5));
}

TEST(OverlayCompositor, CountsLabels) {
  Scene scene;
  std::array<int64_t, 256> counts{};
  accumulate_label_counts(scene.labels.data(), 64, counts);
  EXPECT_EQ(counts[2], 16);
  EXPECT_EQ(counts[1], 1);
  EXPECT_EQ(counts[255], 1);
  EXPECT_EQ(counts[0], 46);
}

}  // namespace
}  // namespace tessera::gui

#include <filesystem>
#include <fstream>

#include "color_table.hpp"
#include "tessera/core/error.hpp"

namespace tessera::gui {
namespace {

TEST(LabelTable, ReadsItkSnapAndSlicerFormats) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto snap = (dir / "tessera-gui-snap.txt").string(), slicer = (dir / "tessera-gui-slicer.ctbl").string();
  std::ofstream(snap) << "# ITK-SNAP\n    2   255  128    0        1  1  1    \"left kidney\"\n";
  std::ofstream(slicer) << "# Color table file\n0 background 0 0 0 0\n1 liver 221 130 101 255\n";
  const LabelTable a = load_label_table(snap), b = load_label_table(slicer);
  EXPECT_EQ(a.names[2], "left kidney");
  EXPECT_EQ(*a.colors[2], qRgb(255, 128, 0));
  EXPECT_EQ(b.names[1], "liver");
  EXPECT_EQ(*b.colors[1], qRgb(221, 130, 101));
  EXPECT_EQ(b.entries, 2);
  std::ofstream(slicer) << "1 liver red\n";
  EXPECT_THROW(load_label_table(slicer), Error);
  std::filesystem::remove(snap);
  std::filesystem::remove(slicer);
}

}  // namespace
}  // namespace tessera::gui
