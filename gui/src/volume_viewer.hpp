#pragma once
// Three linked slice views (axial, coronal, sagittal) of a volume with window/level
// controls (CT presets, editable spin boxes). Loading runs in a worker thread; loaded() or
// failed() follows openVolume(). The destructor waits for a running load.
#include <memory>
#include <thread>

#include <QWidget>

#include "slice_view.hpp"

class QComboBox;
class QDoubleSpinBox;

namespace tessera::gui {

class VolumeViewer : public QWidget {
  Q_OBJECT

 public:
  explicit VolumeViewer(QWidget* parent = nullptr);
  ~VolumeViewer() override;

  void openVolume(const QString& image, const QString& labels);
  void setVolume(std::shared_ptr<const VolumeData> volume);
  std::shared_ptr<const VolumeData> volume() const { return volume_; }
  VolumeCursor* cursor() { return &cursor_; }
  SliceView* view(Plane p) { return views_[int(p)]; }
  void applyPreset(int index);
  void setLabelNames(const std::array<std::string, 256>& names) { names_ = names; }
  /// "voxel (i, j, k) | HU v | label … | LPS (x, y, z) mm".
  QString readout(int i, int j, int k) const;

 signals:
  void loaded();
  void failed(QString message);
  void message(QString text);

 private:
  void syncSpins();

  VolumeCursor cursor_;
  std::shared_ptr<const VolumeData> volume_;
  SliceView* views_[3];
  QComboBox* presets_;
  QDoubleSpinBox* window_;
  QDoubleSpinBox* level_;
  std::array<std::string, 256> names_;
  std::thread job_;
  int generation_ = 0;
};

}  // namespace tessera::gui
