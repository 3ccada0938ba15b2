#pragma once
// tessera-view's main window: a raster view or three linked volume views in the centre,
// an overlay/legend dock and a devices dock, the cursor readout and messages in the status
// bar. File menu and drag and drop open images, label maps and run directories; every read
// happens in worker threads, errors arrive as messages, never as crashes.
#include <memory>
#include <thread>

#include <QMainWindow>

#include <optional>

#include "color_table.hpp"
#include "devices_panel.hpp"
#include "legend_panel.hpp"
#include "raster_view.hpp"
#include "run_mosaic.hpp"
#include "volume_viewer.hpp"

class QDockWidget;
class QLabel;
class QProgressBar;
class QStackedWidget;

namespace tessera::gui {

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  /// Opens a raster or volume (by path; a folder is a DICOM series) with optional labels.
  void openImage(const QString& path, const QString& labels = {});
  void openLabels(const QString& labels);
  /// Shows these 1-based bands (1: grey, 3: RGB) of the current raster; reopens it.
  void setBands(const std::vector<int>& bands);
  /// Shows the run's telemetry and, unless an image is already open, what the run holds
  /// (run_mosaic.hpp): an inference run's finished tiles over its input, reloaded as tiles
  /// arrive with unfinished areas greyed, until every tile is there; a training run's image
  /// with its metrics, checkpoints and telemetry named in the status line. The directory is
  /// read in a worker thread.
  void openRun(const QString& dir);
  /// True while showing a run's tiles as they arrive (some not finished yet).
  bool showingLiveTiles() const { return live_; }
  /// The run's outputs as last read (empty before the first read finished).
  const RunOutputs& runOutputs() const { return run_outputs_; }
  /// Re-reads the run's outputs now (the file watcher does this on changes).
  void reloadRun();
  /// Saves the current view (with overlay) as PNG; false with a message on failure.
  bool exportView(const QString& png);
  /// Label names and colours from an ITK-SNAP or 3D Slicer colour table; message on error.
  bool loadLabelTable(const QString& path);
  void setDevicesHeight(int pixels);
  void buildOverviews();

  RasterView* rasterView() const { return raster_; }
  VolumeViewer* volumeViewer() const { return volume_; }
  LegendPanel* legend() const { return legend_; }
  DevicesPanel* devices() const { return devices_; }
  bool showingVolume() const;
  QString lastMessage() const { return last_message_; }
  QString readoutText() const;
  /// True when the current view is fully loaded (all visible tiles drawn).
  bool viewReady() const;
  /// True while an open, a load or an overview build is running.
  bool isBusy() const;

 signals:
  void ready();

 protected:
  void dragEnterEvent(QDragEnterEvent*) override;
  void dropEvent(QDropEvent*) override;

 private:
  // The constructor's parts.
  void buildDocks();
  void buildStatusBar();
  void buildMenus();
  void connectRaster();
  void connectVolume();
  void watchRuns();
  void showMessage(const QString& text);
  void setBusy(bool busy);
  void setLiveStyle(bool live);
  const std::array<std::string, 256>& classNames() const { return names_; }
  /// Names from the label file, overridden by a loaded colour table; pushed to the views.
  void refreshNames();
  struct RunReload;
  void applyRun(const std::shared_ptr<RunReload>& r);
  void releaseOldMosaics();

  QStackedWidget* stack_;
  RasterView* raster_;
  VolumeViewer* volume_;
  LegendPanel* legend_;
  DevicesPanel* devices_;
  QLabel* message_;
  QLabel* readout_;
  QProgressBar* progress_;
  QString image_path_, labels_path_;
  QString background_for_;  // the labels (or run) whose LABEL_BACKGROUND was last looked at
  bool background_said_ = false;  // and whether they stated one
  std::vector<int> bands_;
  QString last_message_;
  bool volume_ready_ = false;
  bool busy_ = false;
  std::array<std::string, 256> names_;
  std::optional<LabelTable> table_;
  QDockWidget* devices_dock_ = nullptr;
  // Run directory shown live.
  QString run_dir_;
  bool live_ = false;
  QString mosaic_;                  // the mosaic shown or being opened
  std::vector<QString> old_mosaics_;  // freed once no view reads them
  QString run_status_;              // describe_run(), appended to the open message
  std::vector<std::string> run_class_names_;  // from the run's config.yaml
  RunOutputs run_outputs_;
  class QFileSystemWatcher* run_watcher_ = nullptr;
  class QTimer* run_reload_ = nullptr;
  std::thread run_job_;             // reads the run directory and builds the mosaic
  bool run_job_busy_ = false, run_reload_pending_ = false;
  std::thread overview_job_;
};

}  // namespace tessera::gui
