#pragma once
// One of the three linked slice views of a volume. The shared VolumeCursor holds the voxel
// under the crosshair and the window/level; every SliceView shows the slice through the
// cursor along its plane and draws the crosshair, so moving it in one view moves the others.
// Mouse: left click/drag sets the crosshair, right drag changes window (x) and level (y),
// wheel and Up/Down/PageUp/PageDown scroll slices. Pixels are drawn with the physical aspect
// of the voxel spacing; orientation letters (R/L, A/P, S/I) sit on the edges.
#include <array>
#include <memory>
#include <optional>

#include <QObject>
#include <QWidget>

#include "volume_data.hpp"

namespace tessera::gui {

class VolumeCursor : public QObject {
  Q_OBJECT

 public:
  using QObject::QObject;
  std::array<int, 3> voxel{0, 0, 0};  ///< (i, j, k)
  float window = 400, level = 40;
  OverlayStyle overlay;
  bool show_overlay = true;

  void setVoxel(std::array<int, 3> v) {
    if (v == voxel) return;
    voxel = v;
    emit changed();
  }
  void setWindowLevel(float w, float l) {
    window = std::max(1.0f, w);
    level = l;
    emit changed();
  }
  void touch() { emit changed(); }

 signals:
  void changed();
  void hovered(int i, int j, int k);
};

class SliceView : public QWidget {
  Q_OBJECT

 public:
  SliceView(Plane plane, VolumeCursor* cursor, QWidget* parent = nullptr);
  void setVolume(std::shared_ptr<const VolumeData> volume);
  Plane plane() const { return plane_; }
  /// Where slice pixel (col, row) lands in the widget (its centre), for tests and export.
  QPointF slicePixelToWidget(double col, double row) const;
  std::optional<std::array<int, 2>> widgetToSlicePixel(QPointF p) const;
  int sliceIndex() const;

 protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void keyPressEvent(QKeyEvent*) override;

 private:
  QRectF imageRect() const;
  void scroll(int delta);
  void setFromWidget(QPointF p);

  Plane plane_;
  VolumeCursor* cursor_;
  std::shared_ptr<const VolumeData> volume_;
  std::optional<QPointF> wl_from_;
  float wl_window0_ = 0, wl_level0_ = 0;
  bool dragging_ = false;
};

}  // namespace tessera::gui
