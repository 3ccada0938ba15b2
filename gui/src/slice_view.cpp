#include "slice_view.hpp"

#include <algorithm>
#include <cmath>

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QWheelEvent>

namespace tessera::gui {
namespace {

const char* plane_name(Plane p) {
  switch (p) {
    case Plane::Axial: return "Axial";
    case Plane::Coronal: return "Coronal";
    case Plane::Sagittal: return "Sagittal";
  }
  return "";
}

// Edge letters (left, right, top, bottom): slices are always cut radiologically (volume_data.hpp).
std::array<QString, 4> edge_letters(Plane plane) {
  switch (plane) {
    case Plane::Axial: return {"R", "L", "A", "P"};
    case Plane::Coronal: return {"R", "L", "S", "I"};
    case Plane::Sagittal: return {"A", "P", "S", "I"};
  }
  return {};
}

}  // namespace

SliceView::SliceView(Plane plane, VolumeCursor* cursor, QWidget* parent)
    : QWidget(parent), plane_(plane), cursor_(cursor) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setMinimumSize(160, 160);
  connect(cursor_, &VolumeCursor::changed, this, qOverload<>(&QWidget::update));
}

void SliceView::setVolume(std::shared_ptr<const VolumeData> volume) {
  volume_ = std::move(volume);
  update();
}

int SliceView::sliceIndex() const {
  if (!volume_) return 0;
  return voxel_to_slice(*volume_, plane_, cursor_->voxel[0], cursor_->voxel[1], cursor_->voxel[2])[2];
}

QRectF SliceView::imageRect() const {
  if (!volume_) return {};
  const QSize s = slice_size(*volume_, plane_);
  const QSizeF mm = slice_pixel_mm(*volume_, plane_);
  const double pw = s.width() * mm.width(), ph = s.height() * mm.height();
  const double f = std::min((width() - 24) / pw, (height() - 24) / ph);
  const double w = pw * f, h = ph * f;
  return QRectF((width() - w) / 2, (height() - h) / 2, w, h);
}

QPointF SliceView::slicePixelToWidget(double col, double row) const {
  const QRectF r = imageRect();
  const QSize s = slice_size(*volume_, plane_);
  return {r.x() + (col + 0.5) * r.width() / s.width(), r.y() + (row + 0.5) * r.height() / s.height()};
}

std::optional<std::array<int, 2>> SliceView::widgetToSlicePixel(QPointF p) const {
  if (!volume_) return std::nullopt;
  const QRectF r = imageRect();
  const QSize s = slice_size(*volume_, plane_);
  const int col = int(std::floor((p.x() - r.x()) * s.width() / r.width()));
  const int row = int(std::floor((p.y() - r.y()) * s.height() / r.height()));
  if (col < 0 || row < 0 || col >= s.width() || row >= s.height()) return std::nullopt;
  return std::array<int, 2>{col, row};
}

void SliceView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::black);
  if (!volume_) return;
  const int index = sliceIndex();
  const QImage img = render_slice(*volume_, plane_, index, cursor_->window, cursor_->level,
                                  cursor_->show_overlay ? &cursor_->overlay : nullptr);
  const QRectF r = imageRect();
  p.drawImage(r, img);
  // Crosshair through the cursor voxel.
  const auto [col, row, _] = voxel_to_slice(*volume_, plane_, cursor_->voxel[0], cursor_->voxel[1], cursor_->voxel[2]);
  const QPointF c = slicePixelToWidget(col, row);
  p.setPen(QPen(QColor(255, 200, 0), 1));
  p.drawLine(QPointF(r.left(), c.y()), QPointF(r.right(), c.y()));
  p.drawLine(QPointF(c.x(), r.top()), QPointF(c.x(), r.bottom()));
  p.setPen(QColor(120, 200, 255));
  const auto letters = edge_letters(plane_);
  p.drawText(QRectF(0, 0, 14, height()), Qt::AlignCenter, letters[0]);
  p.drawText(QRectF(width() - 14, 0, 14, height()), Qt::AlignCenter, letters[1]);
  p.drawText(QRectF(0, 0, width(), 14), Qt::AlignCenter, letters[2]);
  p.drawText(QRectF(0, height() - 14, width(), 14), Qt::AlignCenter, letters[3]);
  p.setPen(Qt::white);
  p.drawText(QRectF(18, 2, width() - 36, 16), Qt::AlignLeft,
             QStringLiteral("%1  %2/%3").arg(plane_name(plane_)).arg(index + 1).arg(slice_count(*volume_, plane_)));
}

void SliceView::setFromWidget(QPointF p) {
  const auto px = widgetToSlicePixel(p);
  if (!px) return;
  cursor_->setVoxel(slice_to_voxel(*volume_, plane_, sliceIndex(), (*px)[0], (*px)[1]));
}

void SliceView::mousePressEvent(QMouseEvent* e) {
  if (!volume_) return;
  if (e->button() == Qt::LeftButton) {
    dragging_ = true;
    setFromWidget(e->position());
  } else if (e->button() == Qt::RightButton) {
    wl_from_ = e->position();
    wl_window0_ = cursor_->window;
    wl_level0_ = cursor_->level;
  }
}

void SliceView::mouseMoveEvent(QMouseEvent* e) {
  if (!volume_) return;
  if (dragging_) setFromWidget(e->position());
  if (wl_from_) {
    const QPointF d = e->position() - *wl_from_;
    const float unit = std::max(1.0f, (volume_->p_hi - volume_->p_lo) / 400.0f);
    cursor_->setWindowLevel(wl_window0_ + float(d.x()) * unit, wl_level0_ - float(d.y()) * unit);
  }
  if (const auto px = widgetToSlicePixel(e->position())) {
    const auto v = slice_to_voxel(*volume_, plane_, sliceIndex(), (*px)[0], (*px)[1]);
    emit cursor_->hovered(v[0], v[1], v[2]);
  }
}

void SliceView::mouseReleaseEvent(QMouseEvent*) {
  dragging_ = false;
  wl_from_.reset();
}

void SliceView::scroll(int delta) {
  if (!volume_) return;
  const auto v = cursor_->voxel;
  const auto [col, row, index] = voxel_to_slice(*volume_, plane_, v[0], v[1], v[2]);
  cursor_->setVoxel(slice_to_voxel(*volume_, plane_, std::clamp(index + delta, 0, slice_count(*volume_, plane_) - 1), col, row));
}

void SliceView::wheelEvent(QWheelEvent* e) { scroll(e->angleDelta().y() > 0 ? 1 : -1); }

void SliceView::keyPressEvent(QKeyEvent* e) {
  switch (e->key()) {
    case Qt::Key_Up: scroll(1); break;
    case Qt::Key_Down: scroll(-1); break;
    case Qt::Key_PageUp: scroll(10); break;
    case Qt::Key_PageDown: scroll(-10); break;
    default: QWidget::keyPressEvent(e);
  }
}

}  // namespace tessera::gui
