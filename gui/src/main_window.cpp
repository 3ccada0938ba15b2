#include "main_window.hpp"

#include <thread>

#include <QDockWidget>
#include <QFileSystemWatcher>
#include <QTimer>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMimeData>
#include <QProgressBar>
#include <QStackedWidget>
#include <QStatusBar>

#include "readout.hpp"
#include "run_mosaic.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/io/open_image.hpp"

namespace tessera::gui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(tr("tessera-view"));
  setAcceptDrops(true);
  stack_ = new QStackedWidget(this);
  raster_ = new RasterView(stack_);
  volume_ = new VolumeViewer(stack_);
  stack_->addWidget(raster_);
  stack_->addWidget(volume_);
  setCentralWidget(stack_);
  buildDocks();
  buildStatusBar();
  buildMenus();
  connectRaster();
  connectVolume();
  watchRuns();
  resize(1280, 860);
}

// The overlay legend on the right, the devices panel at the bottom.
void MainWindow::buildDocks() {
  legend_ = new LegendPanel(this);
  auto* legend_dock = new QDockWidget(tr("Overlay"), this);
  legend_dock->setObjectName("overlay");
  legend_dock->setWidget(legend_);
  addDockWidget(Qt::RightDockWidgetArea, legend_dock);
  devices_ = new DevicesPanel(this);
  auto* devices_dock = devices_dock_ = new QDockWidget(tr("Devices"), this);
  devices_dock->setObjectName("devices");
  devices_dock->setWidget(devices_);
  addDockWidget(Qt::BottomDockWidgetArea, devices_dock);
  resizeDocks({devices_dock}, {170}, Qt::Vertical);

}

void MainWindow::buildStatusBar() {
  // Messages on the left, the cursor readout on the right; both stay visible together.
  message_ = new QLabel(this);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->setMinimumWidth(100);
  statusBar()->addWidget(message_, 1);
  readout_ = new QLabel(this);
  readout_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  statusBar()->addPermanentWidget(readout_);
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 0);
  progress_->setMaximumWidth(120);
  progress_->hide();
  statusBar()->addPermanentWidget(progress_);

}

void MainWindow::buildMenus() {
  auto* file = menuBar()->addMenu(tr("&File"));
  auto* view_menu = menuBar()->addMenu(tr("&View"));
  view_menu->addAction(tr("&Bands…"), this, [this] {
    bool ok = false;
    const QString text = QInputDialog::getText(this, tr("Bands"), tr("1-based bands, one (grey) or three (R,G,B), e.g. 4,3,2"),
                                               QLineEdit::Normal, {}, &ok);
    if (!ok) return;
    std::vector<int> b;
    for (const QString& part : text.split(',', Qt::SkipEmptyParts)) b.push_back(part.trimmed().toInt());
    setBands(b);
  });
  view_menu->addAction(tr("&Fit to window"), this, [this] { raster_->fitToWindow(); });
  file->addAction(tr("&Open image…"), QKeySequence::Open, this, [this] {
    const QString p = QFileDialog::getOpenFileName(this, tr("Open image"), {},
        tr("Images (*.tif *.tiff *.vrt *.nii *.nii.gz *.nrrd *.nhdr *.mha *.mhd);;All files (*)"));
    if (!p.isEmpty()) openImage(p);
  });
  file->addAction(tr("Open DICOM &folder…"), this, [this] {
    const QString d = QFileDialog::getExistingDirectory(this, tr("Open DICOM series"));
    if (!d.isEmpty()) openImage(d);
  });
  file->addAction(tr("Open &labels…"), this, [this] {
    const QString p = QFileDialog::getOpenFileName(this, tr("Open label map"));
    if (!p.isEmpty()) openLabels(p);
  });
  file->addAction(tr("Open &run directory…"), this, [this] {
    const QString d = QFileDialog::getExistingDirectory(this, tr("Open run directory"));
    if (!d.isEmpty()) openRun(d);
  });
  file->addAction(tr("Load label &colour table…"), this, [this] {
    const QString p = QFileDialog::getOpenFileName(this, tr("Label colour table (ITK-SNAP, 3D Slicer)"), {},
                                                   tr("Colour tables (*.txt *.ctbl *.label);;All files (*)"));
    if (!p.isEmpty()) loadLabelTable(p);
  });
  file->addAction(tr("&Build overviews"), this, &MainWindow::buildOverviews);
  file->addAction(tr("&Export view as PNG…"), this, [this] {
    const QString p = QFileDialog::getSaveFileName(this, tr("Export view"), "view.png", tr("PNG (*.png)"));
    if (!p.isEmpty()) exportView(p);
  });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

}

// The overlay legend and the raster view: style changes, an image opened or failed, the
// label counts, the cursor readout.
void MainWindow::connectRaster() {
  connect(legend_, &LegendPanel::styleChanged, this, [this](const OverlayStyle& s) {
    raster_->setOverlayStyle(s);
    volume_->cursor()->overlay = s;
    volume_->cursor()->touch();
  });
  connect(raster_, &RasterView::opened, this, [this] {
    setBusy(false);
    releaseOldMosaics();
    stack_->setCurrentWidget(raster_);
    OverlayStyle s = legend_->style();
    s.colors = raster_->overlayStyle().colors;  // the label file's colour table, if any
    // Class 0 starts checked where the labels say it is a class (data.background: none, e.g.
    // water), unchecked where they say it is the background. Labels that say nothing leave it
    // as it is, unless the last labels set it (their statement does not carry over); a choice
    // the user made stays while the same labels (or a live run's growing mosaic) reload.
    const QString labels_key = run_dir_.isEmpty() ? labels_path_ : run_dir_;
    if (labels_key != background_for_) {
      background_for_ = labels_key;
      const std::string said = raster_->labelMeta() ? raster_->labelMeta()->background : std::string();
      if (!said.empty()) s.visible[0] = said == "none";
      else if (background_said_) s.visible[0] = false;
      background_said_ = !said.empty();
    }
    legend_->setStyle(s);
    refreshNames();
    const auto& m = raster_->meta();
    showMessage(tr("%1: %2 × %3, %4 band(s) %5%6")
                    .arg(QString::fromStdString(m.path)).arg(m.width).arg(m.height).arg(m.bands)
                    .arg(QString::fromStdString(m.data_type))
                    .arg(m.overview_count == 0 && std::max(m.width, m.height) > 4096
                             ? tr(" — no overviews: File > Build overviews makes zooming out fast")
                             : QString()) +
                (run_dir_.isEmpty() ? QString() : QStringLiteral(" — ") + run_status_));
  });
  connect(raster_, &RasterView::countsChanged, this,
          [this] { legend_->setLabels(classNames(), raster_->labelCounts()); });
  connect(raster_, &RasterView::failed, this, [this](const QString& m) {
    setBusy(false);
    showMessage(m);
    if (!raster_->hasImage()) raster_->setPlaceholder(tr("Cannot show this file:\n%1").arg(m));
  });
  connect(raster_, &RasterView::message, this, &MainWindow::showMessage);
  connect(raster_, &RasterView::viewComplete, this, [this] {
    if (!showingVolume() && raster_->hasImage() && !raster_->loading()) emit ready();
  });
  connect(raster_, &RasterView::probed, this, [this](const RasterProbe& p) {
    readout_->setText(format_raster_readout(raster_->meta(), classNames(), p.x, p.y, p.values, p.label));
  });
}

// The volume viewer: loaded or failed, the voxel readout; the devices panel's messages.
void MainWindow::connectVolume() {
  connect(volume_, &VolumeViewer::loaded, this, [this] {
    setBusy(false);
    volume_ready_ = true;
    stack_->setCurrentWidget(volume_);
    const auto v = volume_->volume();
    volume_->cursor()->overlay = legend_->style();
    refreshNames();
    showMessage(tr("%1: %2 × %3 × %4 voxels, spacing %5 × %6 × %7 mm")
                    .arg(QString::fromStdString(v->path)).arg(v->nx).arg(v->ny).arg(v->nz)
                    .arg(v->spacing[0]).arg(v->spacing[1]).arg(v->spacing[2]) +
                (v->source_note.isEmpty() ? QString() : QStringLiteral("; ") + v->source_note) +
                (run_dir_.isEmpty() ? QString() : QStringLiteral(" — ") + run_status_));
    emit ready();
  });
  connect(volume_, &VolumeViewer::failed, this, [this](const QString& m) {
    setBusy(false);
    showMessage(m);
    if (!showingVolume() && !raster_->hasImage()) raster_->setPlaceholder(tr("Cannot show this file:\n%1").arg(m));
  });
  connect(volume_, &VolumeViewer::message, this, &MainWindow::showMessage);
  connect(volume_->cursor(), &VolumeCursor::hovered, this,
          [this](int i, int j, int k) { readout_->setText(volume_->readout(i, j, k)); });
  connect(volume_->cursor(), &VolumeCursor::changed, this, [this] {
    const auto v = volume_->cursor()->voxel;
    if (volume_->volume()) readout_->setText(volume_->readout(v[0], v[1], v[2]));
  });
  connect(devices_, &DevicesPanel::message, this, &MainWindow::showMessage);
}

// A run directory reloads when its tiles change (debounced: tiles often arrive in bursts).
void MainWindow::watchRuns() {
  run_watcher_ = new QFileSystemWatcher(this);
  run_reload_ = new QTimer(this);
  run_reload_->setSingleShot(true);
  run_reload_->setInterval(300);  // tiles often arrive in bursts
  // Not restarted by every change: tiles arriving faster than the interval still reload it.
  connect(run_watcher_, &QFileSystemWatcher::directoryChanged, this, [this] {
    if (!run_reload_->isActive()) run_reload_->start();
  });
  connect(run_reload_, &QTimer::timeout, this, &MainWindow::reloadRun);
}

MainWindow::~MainWindow() {
  if (overview_job_.joinable()) overview_job_.join();
  if (run_job_.joinable()) run_job_.join();
}

void MainWindow::refreshNames() {
  names_ = {};
  if (!showingVolume() && raster_->labelMeta()) names_ = raster_->labelMeta()->class_names;
  for (size_t i = 0; i < run_class_names_.size() && i < 256; ++i)
    if (names_[i].empty()) names_[i] = run_class_names_[i];
  OverlayStyle style = legend_->style();
  std::optional<LabelTable> sidecar;  // a label volume's names: NIfTI / NRRD / MHA carry none
  if (showingVolume() && !labels_path_.isEmpty()) {
    try {
      sidecar = label_volume_table(labels_path_.toStdString());
    } catch (const std::exception& e) {
      showMessage(QString::fromStdString(e.what()));
    }
  }
  const auto apply = [&](const LabelTable& table) {
    for (size_t i = 0; i < 256; ++i) {
      if (!table.names[i].empty()) names_[i] = table.names[i];
      if (table.colors[i]) style.colors[i] = *table.colors[i];
      if (table.visible[i]) style.visible[i] = *table.visible[i];
    }
    legend_->setStyle(style);
  };
  // The label file's own table (a DICOM SEG's segments), its side files (ITK-SNAP, Slicer),
  // then a table the user loaded: the last wins.
  if (showingVolume() && volume_->volume() && volume_->volume()->label_table) apply(*volume_->volume()->label_table);
  if (sidecar) apply(*sidecar);
  if (table_) apply(*table_);
  volume_->setLabelNames(names_);
  if (showingVolume() && volume_->volume())
    legend_->setLabels(names_, volume_->volume()->counts);
  else
    legend_->setLabels(names_, raster_->labelCounts());
}

bool MainWindow::loadLabelTable(const QString& path) {
  try {
    table_ = load_label_table(path.toStdString());
  } catch (const std::exception& e) {
    showMessage(QString::fromStdString(e.what()));
    return false;
  }
  refreshNames();
  showMessage(tr("%1: %2 labels").arg(path).arg(table_->entries));
  return true;
}

void MainWindow::setDevicesHeight(int pixels) { resizeDocks({devices_dock_}, {pixels}, Qt::Vertical); }

bool MainWindow::showingVolume() const { return stack_->currentWidget() == volume_; }

QString MainWindow::readoutText() const { return readout_->text(); }

bool MainWindow::viewReady() const {
  if (showingVolume()) return volume_ready_;
  return raster_->hasImage() && !raster_->loading();
}

void MainWindow::showMessage(const QString& text) {
  last_message_ = text;
  message_->setText(text);
  message_->setToolTip(text);
}

void MainWindow::setBusy(bool busy) {
  busy_ = busy;
  progress_->setVisible(busy);
}

bool MainWindow::isBusy() const { return busy_; }

void MainWindow::openImage(const QString& path, const QString& labels) {
  image_path_ = path;
  labels_path_ = labels;
  setBusy(true);
  showMessage(tr("Opening %1…").arg(path));
  setWindowTitle(tr("tessera-view — %1").arg(QFileInfo(path).fileName()));
  if (io::is_volume_path(path.toStdString())) {
    volume_ready_ = false;
    volume_->openVolume(path, labels);
  } else {
    raster_->openRaster(path, labels, bands_);
  }
}

void MainWindow::setBands(const std::vector<int>& bands) {
  bands_ = bands;
  if (!image_path_.isEmpty() && !showingVolume()) openImage(image_path_, labels_path_);
}

void MainWindow::openLabels(const QString& labels) {
  if (image_path_.isEmpty()) {
    showMessage(tr("Open an image before its label map"));
    return;
  }
  openImage(image_path_, labels);
}

void MainWindow::openRun(const QString& dir) {
  devices_->setRunDirectory(dir);
  if (!image_path_.isEmpty() && run_dir_.isEmpty()) return;  // an image given by the user stays
  run_dir_ = dir;
  run_outputs_ = {};
  if (!run_watcher_->directories().isEmpty()) run_watcher_->removePaths(run_watcher_->directories());
  reloadRun();
}

void MainWindow::setLiveStyle(bool live) {
  // Unfinished areas (nodata in the mosaic) are greyed while tiles arrive.
  OverlayStyle s = legend_->style();
  s.visible[kNoDataLabel] = live;
  s.colors[kNoDataLabel] = live ? qRgb(70, 70, 70) : qRgb(0, 0, 0);
  legend_->setStyle(s);
}

// What a worker read from the run directory, handed to the GUI thread.
struct MainWindow::RunReload {
  QString dir;
  RunOutputs out;
  std::string mosaic;  // /vsimem/ VRT of the finished tiles, empty when none
  QString error;
};

void MainWindow::reloadRun() {
  if (run_dir_.isEmpty()) return;
  if (run_job_busy_) {
    run_reload_pending_ = true;  // read again once the running job is applied
    return;
  }
  if (run_job_.joinable()) run_job_.join();  // done: its result was applied
  run_job_busy_ = true;
  run_job_ = std::thread([this, dir = run_dir_] {
    auto r = std::make_shared<RunReload>();
    r->dir = dir;
    r->out = find_run_outputs(dir.toStdString());
    if (!r->out.tiles.empty() && !r->out.image.empty()) {
      try {
        r->mosaic = build_tile_mosaic(r->out.tiles, r->out.image);
      } catch (const std::exception& e) {
        r->error = QString::fromStdString(e.what());
      }
    }
    QMetaObject::invokeMethod(this, [this, r] { applyRun(r); }, Qt::QueuedConnection);
  });
}

void MainWindow::applyRun(const std::shared_ptr<RunReload>& r) {
  run_job_busy_ = false;
  if (run_reload_pending_) {
    run_reload_pending_ = false;
    QTimer::singleShot(0, this, &MainWindow::reloadRun);
  }
  if (r->dir != run_dir_) {  // another run was opened meanwhile
    if (!r->mosaic.empty()) release_tile_mosaic(r->mosaic);
    return;
  }
  const bool tiles_unchanged = run_outputs_.tile_set == r->out.tile_set && run_outputs_.tiles == r->out.tiles;
  const RunOutputs& out = run_outputs_ = r->out;
  run_class_names_ = out.class_names;
  for (const std::string& dir : out.watch)
    if (!run_watcher_->directories().contains(QString::fromStdString(dir))) run_watcher_->addPath(QString::fromStdString(dir));
  run_status_ = QString::fromStdString(describe_run(run_dir_.toStdString(), out));
  const QString image = QString::fromStdString(out.image);
  if (!r->error.isEmpty() || image.isEmpty()) {
    showMessage(r->error.isEmpty() ? run_status_ : r->error);
    // Not a blank "Open an image": what is missing, where the image should have been.
    if (!raster_->hasImage() && !showingVolume())
      raster_->setPlaceholder(QString::fromStdString(out.problem.empty() ? "This run names no image" : out.problem));
    return;
  }
  if (io::is_volume_path(out.image)) {  // a training run on volumes: the three views
    if (image_path_ != image) openImage(image);
    showMessage(run_status_);
    return;
  }
  const bool same_image = image_path_ == image && raster_->hasImage();
  const bool live = !out.tile_set.empty() && !out.tiles_complete();
  if (r->mosaic.empty()) {  // a training run, or no tile finished yet: the image alone
    live_ = live;
    setLiveStyle(live);
    if (!same_image || !labels_path_.isEmpty()) {
      image_path_ = image;
      labels_path_.clear();
      setBusy(true);
      raster_->openRaster(image, {}, bands_, same_image);
    }
  } else if (same_image && tiles_unchanged && labels_path_ == mosaic_) {
    release_tile_mosaic(r->mosaic);  // nothing new to show
  } else {
    if (!mosaic_.isEmpty()) old_mosaics_.push_back(mosaic_);
    mosaic_ = QString::fromStdString(r->mosaic);
    live_ = live;
    setLiveStyle(live);
    image_path_ = image;
    labels_path_ = mosaic_;
    setBusy(true);
    raster_->openRaster(image, mosaic_, bands_, same_image);
  }
  showMessage(run_status_);
}

void MainWindow::releaseOldMosaics() {
  const QString shown = raster_->labelMeta() ? QString::fromStdString(raster_->labelMeta()->path) : QString();
  std::erase_if(old_mosaics_, [&](const QString& m) {
    if (m == shown || m == mosaic_) return false;
    release_tile_mosaic(m.toStdString());
    return true;
  });
}

bool MainWindow::exportView(const QString& png) {
  const QImage image = stack_->currentWidget()->grab().toImage();
  if (!image.save(png, "PNG")) {
    showMessage(tr("%1: cannot write PNG").arg(png));
    return false;
  }
  showMessage(tr("Saved %1").arg(png));
  return true;
}

void MainWindow::buildOverviews() {
  if (image_path_.isEmpty() || showingVolume()) return;
  if (overview_job_.joinable()) overview_job_.join();
  setBusy(true);
  showMessage(tr("Building overviews of %1…").arg(image_path_));
  overview_job_ = std::thread([this, image = image_path_.toStdString(), labels = labels_path_.toStdString()] {
    QString error;
    try {
      RasterPyramid::build_overviews(image, false);
      if (!labels.empty()) RasterPyramid::build_overviews(labels, true);
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        this, [this, error] {
          if (!error.isEmpty()) {
            setBusy(false);
            showMessage(error);
          } else {
            openImage(image_path_, labels_path_);
          }
        },
        Qt::QueuedConnection);
  });
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
  QStringList paths;
  for (const QUrl& u : e->mimeData()->urls())
    if (u.isLocalFile()) paths << u.toLocalFile();
  if (paths.isEmpty()) return;
  const QFileInfo first(paths.front());
  const RunLayout run(first.filePath().toStdString());
  if (first.isDir() && (QFileInfo(QString::fromStdString(run.telemetry_dir())).isDir() ||
                        QFileInfo(QString::fromStdString(run.tiles_dir())).isDir() ||
                        QFileInfo(QString::fromStdString(run.config())).exists())) {
    openRun(first.filePath());
  } else if (paths.size() >= 2) {
    openImage(paths[0], paths[1]);
  } else if (!image_path_.isEmpty() && (e->modifiers() & Qt::ShiftModifier)) {
    openLabels(paths[0]);  // Shift+drop: a label map over the current image
  } else {
    openImage(paths[0]);
  }
  e->acceptProposedAction();
}

}  // namespace tessera::gui
