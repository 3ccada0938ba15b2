#pragma once
// Overlay controls: opacity slider (default 0.5), fill/outline, "show only selected", and a
// legend of labels (colour, id, name, pixel/voxel count) with a visibility check box each.
// It owns no data: it edits an OverlayStyle and emits it; the views apply it.
#include <array>
#include <string>

#include <QWidget>

#include "overlay_compositor.hpp"

class QCheckBox;
class QSlider;
class QTableWidget;

namespace tessera::gui {

class LegendPanel : public QWidget {
  Q_OBJECT

 public:
  explicit LegendPanel(QWidget* parent = nullptr);
  /// Lists the labels with a non-zero count (or named ones when counts are all zero).
  void setLabels(const std::array<std::string, 256>& names, const std::array<int64_t, 256>& counts);
  const OverlayStyle& style() const { return style_; }
  void setStyle(const OverlayStyle& style);
  void setOpacity(double alpha);
  void setOutline(bool on);
  void setLabelVisible(int label, bool visible);
  /// Selects a label row; with "show only selected" on, only that label is drawn.
  void selectLabel(int label);
  void setShowOnlySelected(bool on);
  QTableWidget* table() const { return table_; }

 signals:
  void styleChanged(tessera::gui::OverlayStyle style);

 private:
  void rebuildOnly();
  int selectedLabel() const;

  OverlayStyle style_;
  QSlider* opacity_;
  QCheckBox* outline_;
  QCheckBox* only_selected_;
  QTableWidget* table_;
  bool updating_ = false;
};

}  // namespace tessera::gui
