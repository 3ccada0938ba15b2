#pragma once
// The devices panel: one row per rank of a run (RUN/telemetry/rank-*.jsonl) plus this
// machine's GPUs (NVML, loaded at run time) or its host CPU/RAM when it has none: memory
// used/total and utilisation (a GPU rank: its device's; a CPU rank: its own process's RSS and
// CPU time, as every rank of a host shares the host's), phase, step (for inference: tiles),
// tiles done, a history sparkline, "done" for a rank whose last sample says it finished and a
// stale marker when an unfinished rank's last sample is older than staleSeconds().
// Files are read in a worker every refresh interval (1.5 s) and on file-system change;
// broken lines are reported through message(), never fatal.
#include <atomic>
#include <memory>
#include <thread>

#include <QWidget>

#include "telemetry.hpp"

class QTableWidget;
class QLabel;
class QFileSystemWatcher;
class QTimer;

namespace tessera::gui {

class DevicesPanel : public QWidget {
  Q_OBJECT

 public:
  explicit DevicesPanel(QWidget* parent = nullptr);
  ~DevicesPanel() override;
  void setRunDirectory(const QString& dir);
  QString runDirectory() const { return run_dir_; }
  void setStaleSeconds(double s) { stale_seconds_ = s; }
  double staleSeconds() const { return stale_seconds_; }
  /// Starts a read now (asynchronous); refreshed() follows.
  void refresh();
  /// Shows a snapshot (GUI thread); public for tests.
  /// `local`: this machine's GPUs, or its host CPU/RAM when it has none.
  void showSnapshot(const TelemetrySnapshot& snap, const std::vector<TelemetrySample>& local);
  /// Why no local GPU is listed (NVML absent, no device); empty when GPUs are shown.
  QString localNote() const { return local_note_; }
  QTableWidget* table() const { return table_; }
  /// Row of a rank, -1 if absent; the local host row has rank -1 and comes last.
  int rowOfRank(int rank) const;
  bool isStale(int rank) const;
  /// The rank's last sample has phase "done": shown "done" (green), never stale.
  bool isDone(int rank) const;

 signals:
  void refreshed();
  void message(QString text);

 private:
  QString run_dir_;
  QTableWidget* table_;
  QLabel* header_;
  QTimer* timer_;
  QFileSystemWatcher* watcher_;
  double stale_seconds_ = 10.0;
  std::thread job_;
  std::shared_ptr<TelemetryReader> reader_;  // used by one refresh job at a time
  std::atomic<bool> busy_{false};
  std::atomic<bool> again_{false};
  int last_broken_ = -1;
  std::vector<std::vector<TelemetrySample>> local_history_;  // per local device
  QString local_note_;
};

}  // namespace tessera::gui
