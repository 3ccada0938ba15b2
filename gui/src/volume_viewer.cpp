#include "volume_viewer.hpp"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QLabel>

#include "readout.hpp"

namespace tessera::gui {
namespace {
// The preset box: percentile range, the CT presets, then the window stored in the file
// (present only while the volume has one).
int storedWindowIndex() { return 1 + int(ct_window_presets().size()); }
}  // namespace

VolumeViewer::VolumeViewer(QWidget* parent) : QWidget(parent), cursor_(this) {
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setSpacing(2);
  const Plane planes[3] = {Plane::Axial, Plane::Coronal, Plane::Sagittal};
  for (int i = 0; i < 3; ++i) views_[i] = new SliceView(planes[i], &cursor_, this);
  grid->addWidget(views_[0], 0, 0);
  grid->addWidget(views_[1], 0, 1);
  grid->addWidget(views_[2], 1, 0);
  auto* controls = new QWidget(this);
  auto* form = new QFormLayout(controls);
  presets_ = new QComboBox(controls);
  presets_->addItem(tr("Percentile range"));
  for (const auto& p : ct_window_presets()) presets_->addItem(tr(p.name));
  window_ = new QDoubleSpinBox(controls);
  level_ = new QDoubleSpinBox(controls);
  for (auto* s : {window_, level_}) {
    s->setRange(-100000, 100000);
    s->setDecimals(0);
  }
  window_->setMinimum(1);
  form->addRow(tr("Preset"), presets_);
  form->addRow(tr("Window"), window_);
  form->addRow(tr("Level"), level_);
  form->addRow(new QLabel(tr("Left: crosshair · Right drag: window/level\nWheel, ↑/↓: slices"), controls));
  grid->addWidget(controls, 1, 1);
  connect(presets_, &QComboBox::activated, this, &VolumeViewer::applyPreset);
  connect(window_, &QDoubleSpinBox::editingFinished, this,
          [this] { cursor_.setWindowLevel(float(window_->value()), cursor_.level); });
  connect(level_, &QDoubleSpinBox::editingFinished, this,
          [this] { cursor_.setWindowLevel(cursor_.window, float(level_->value())); });
  connect(&cursor_, &VolumeCursor::changed, this, &VolumeViewer::syncSpins);
}

VolumeViewer::~VolumeViewer() {
  if (job_.joinable()) job_.join();
}

void VolumeViewer::syncSpins() {
  window_->blockSignals(true);
  level_->blockSignals(true);
  window_->setValue(cursor_.window);
  level_->setValue(cursor_.level);
  window_->blockSignals(false);
  level_->blockSignals(false);
}

void VolumeViewer::openVolume(const QString& image, const QString& labels) {
  if (job_.joinable()) job_.join();
  const int generation = ++generation_;
  job_ = std::thread([this, generation, image = image.toStdString(), labels = labels.toStdString()] {
    std::shared_ptr<VolumeData> v;
    QString error;
    try {
      v = load_volume(image, labels);
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        this, [this, v, error, generation] {
          if (job_.joinable()) job_.join();
          if (generation != generation_) return;
          if (!v) {
            emit failed(error);
            return;
          }
          setVolume(v);
          emit loaded();
          if (!v->label_message.isEmpty()) emit message(v->label_message);
        },
        Qt::QueuedConnection);
  });
}

void VolumeViewer::setVolume(std::shared_ptr<const VolumeData> volume) {
  volume_ = std::move(volume);
  for (auto* v : views_) v->setVolume(volume_);
  cursor_.voxel = {volume_->nx / 2, volume_->ny / 2, volume_->nz / 2};
  const int stored = storedWindowIndex();
  while (presets_->count() > stored) presets_->removeItem(stored);
  if (volume_->has_stored_window)
    presets_->addItem(tr("Stored in the file (W %1, L %2)").arg(volume_->stored_window).arg(volume_->stored_level));
  // A window stored with the series first; else CT opens in the abdomen window, anything else
  // in its 1st–99th percentile range.
  const int preset = volume_->has_stored_window ? stored : volume_->looks_like_ct ? 4 : 0;
  applyPreset(preset);
  presets_->setCurrentIndex(preset);
}

void VolumeViewer::applyPreset(int index) {
  if (index == storedWindowIndex()) {
    if (volume_ && volume_->has_stored_window) cursor_.setWindowLevel(volume_->stored_window, volume_->stored_level);
    return;
  }
  if (index <= 0) {
    if (volume_) cursor_.setWindowLevel(volume_->p_hi - volume_->p_lo, (volume_->p_hi + volume_->p_lo) / 2);
    return;
  }
  const auto& p = ct_window_presets()[size_t(index - 1)];
  cursor_.setWindowLevel(p.window, p.level);
}

QString VolumeViewer::readout(int i, int j, int k) const {
  if (!volume_) return {};
  const auto p = voxel_to_lps(volume_->spacing, volume_->origin, volume_->direction, i, j, k);
  QString s = QStringLiteral("voxel (%1, %2, %3)  |  %4 %5").arg(i).arg(j).arg(k)
                  .arg(volume_->looks_like_ct ? "HU" : "value")
                  .arg(double(volume_->at(i, j, k)), 0, 'g', 6);
  const int l = volume_->label_at(i, j, k);
  if (l >= 0) s += QStringLiteral("  |  ") + label_text(names_, l);
  s += QStringLiteral("  |  LPS (%1, %2, %3) mm").arg(p[0], 0, 'f', 2).arg(p[1], 0, 'f', 2).arg(p[2], 0, 'f', 2);
  return s;
}

}  // namespace tessera::gui
