#include "devices_panel.hpp"

#include <QDir>
#include <QFileSystemWatcher>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QPainterPath>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include "tessera/run/run_layout.hpp"

namespace tessera::gui {
namespace {

enum Column { kRank, kDevice, kMemory, kUtil, kSensors, kPhase, kStep, kTiles, kHistory, kStatus, kColumns };

QString gib(double bytes) { return QString::number(bytes / double(1ll << 30), 'f', 2); }

// Utilisation (blue) and memory fraction (orange) over the kept history.
class Sparkline : public QWidget {
 public:
  Sparkline(std::vector<double> util, std::vector<double> mem, QWidget* parent)
      : QWidget(parent), util_(std::move(util)), mem_(std::move(mem)) {
    setMinimumSize(120, 22);
  }

 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QRectF r = QRectF(rect()).adjusted(2, 3, -2, -3);
    auto line = [&](const std::vector<double>& v, QColor c) {
      if (v.size() < 2) return;
      QPainterPath path;
      for (size_t i = 0; i < v.size(); ++i) {
        const QPointF pt(r.left() + r.width() * double(i) / double(v.size() - 1),
                         r.bottom() - r.height() * std::clamp(v[i], 0.0, 1.0));
        i == 0 ? path.moveTo(pt) : path.lineTo(pt);
      }
      p.setPen(QPen(c, 1.5));
      p.drawPath(path);
    };
    line(mem_, QColor(255, 152, 0));
    line(util_, QColor(30, 136, 229));
  }

 private:
  std::vector<double> util_, mem_;
};

}  // namespace

DevicesPanel::DevicesPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  header_ = new QLabel(tr("No run directory (File > Open run…)"), this);
  layout->addWidget(header_);
  table_ = new QTableWidget(0, kColumns, this);
  table_->setHorizontalHeaderLabels(
      {tr("Rank"), tr("Host / device"), tr("Memory GiB"), tr("Util %"), tr("Temp / power"), tr("Phase"), tr("Step"), tr("Tiles"),
       tr("History"), tr("Status")});
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->horizontalHeader()->setStretchLastSection(true);
  layout->addWidget(table_);
  timer_ = new QTimer(this);
  timer_->setInterval(1500);
  connect(timer_, &QTimer::timeout, this, &DevicesPanel::refresh);
  watcher_ = new QFileSystemWatcher(this);
  connect(watcher_, &QFileSystemWatcher::directoryChanged, this, &DevicesPanel::refresh);
  timer_->start();
  refresh();
}

DevicesPanel::~DevicesPanel() {
  if (job_.joinable()) job_.join();
}

void DevicesPanel::setRunDirectory(const QString& dir) {
  if (!watcher_->directories().isEmpty()) watcher_->removePaths(watcher_->directories());
  run_dir_ = dir;
  last_broken_ = -1;
  if (job_.joinable()) job_.join();  // the running job may hold the previous reader
  reader_ = dir.isEmpty() ? nullptr : std::make_shared<TelemetryReader>(dir.toStdString());
  const QString tdir = QString::fromStdString(RunLayout(dir.toStdString()).telemetry_dir());
  if (QDir(tdir).exists()) watcher_->addPath(tdir);
  header_->setText(tr("Run: %1").arg(dir));
  refresh();
}

void DevicesPanel::refresh() {
  if (busy_.exchange(true)) {  // one read at a time; read again when it finishes
    again_ = true;
    return;
  }
  if (job_.joinable()) job_.join();
  job_ = std::thread([this, reader = reader_] {
    TelemetrySnapshot snap;
    if (reader) snap = reader->poll();
    std::string note;
    std::vector<TelemetrySample> local = sample_local_gpus(&note);
    if (local.empty()) local.push_back(sample_local_host());
    QMetaObject::invokeMethod(
        this, [this, snap, local, note] {
          busy_ = false;
          local_note_ = QString::fromStdString(note);
          header_->setText((run_dir_.isEmpty() ? tr("No run directory (File > Open run…)") : tr("Run: %1").arg(run_dir_)) +
                           (local_note_.isEmpty() ? QString() : QStringLiteral("   ·   ") + local_note_));
          showSnapshot(snap, local);
          emit refreshed();
          if (again_.exchange(false)) refresh();
        },
        Qt::QueuedConnection);
  });
}

int DevicesPanel::rowOfRank(int rank) const {
  for (int r = 0; r < table_->rowCount(); ++r)
    if (table_->item(r, kRank)->data(Qt::UserRole).toInt() == rank) return r;
  return -1;
}

bool DevicesPanel::isStale(int rank) const {
  const int r = rowOfRank(rank);
  return r >= 0 && table_->item(r, kStatus)->data(Qt::UserRole).toBool();
}

void DevicesPanel::showSnapshot(const TelemetrySnapshot& snap, const std::vector<TelemetrySample>& local) {
  const double now = telemetry_time_now();
  table_->setRowCount(0);
  auto add_row = [&](int rank, const TelemetrySample& s, const std::vector<TelemetrySample>& history, bool is_host) {
    const int row = table_->rowCount();
    table_->insertRow(row);
    auto* rank_item = new QTableWidgetItem(is_host ? tr("local") : QString::number(rank));
    rank_item->setData(Qt::UserRole, rank);
    table_->setItem(row, kRank, rank_item);
    table_->setItem(row, kDevice, new QTableWidgetItem(QString::fromStdString(s.host + " / " + s.device)));
    table_->setItem(row, kMemory, new QTableWidgetItem(QStringLiteral("%1 / %2").arg(gib(double(s.mem_used_bytes)), gib(double(s.mem_total_bytes)))));
    table_->setItem(row, kUtil, new QTableWidgetItem(QString::number(s.util_pct, 'f', 0)));
    QStringList extra;
    if (s.temperature_c) extra << QStringLiteral("%1 °C").arg(*s.temperature_c, 0, 'f', 0);
    if (s.power_w) extra << QStringLiteral("%1 W").arg(*s.power_w, 0, 'f', 0);
    table_->setItem(row, kSensors, new QTableWidgetItem(extra.join("  ")));
    QString phase = QString::fromStdString(s.phase);
    if (s.stage.stage >= 0)  // a pipeline rank: which stage, and its last step
      phase += tr(" · stage %1 (%2 s/step)").arg(s.stage.stage).arg(s.stage.step_seconds, 0, 'f', 2);
    table_->setItem(row, kPhase, new QTableWidgetItem(phase));
    table_->setItem(row, kStep, new QTableWidgetItem(is_host ? QString() : QString::number(s.step)));
    table_->setItem(row, kTiles, new QTableWidgetItem(is_host ? QString() : QString::number(s.tiles_done)));
    std::vector<double> util, mem;
    for (const auto& h : history) {
      util.push_back(h.util_pct / 100.0);
      mem.push_back(h.mem_total_bytes > 0 ? double(h.mem_used_bytes) / double(h.mem_total_bytes) : 0.0);
    }
    table_->setCellWidget(row, kHistory, new Sparkline(util, mem, table_));
    const double age = now - s.time;
    const bool stale = !is_host && age > stale_seconds_;
    auto* status = new QTableWidgetItem(stale ? tr("STALE (%1 s)").arg(qRound64(age)) : tr("ok"));
    status->setData(Qt::UserRole, stale);
    if (stale) {
      status->setBackground(QColor(183, 28, 28));
      status->setForeground(Qt::white);
    }
    table_->setItem(row, kStatus, status);
  };
  for (const auto& r : snap.ranks)
    if (!r.history.empty()) add_row(r.rank, r.history.back(), r.history, false);
  local_history_.resize(local.size());
  for (size_t i = 0; i < local.size(); ++i) {
    auto& h = local_history_[i];
    h.push_back(local[i]);
    if (h.size() > 120) h.erase(h.begin());
    add_row(-1, local[i], h, true);
  }
  table_->resizeColumnsToContents();
  if (snap.broken_lines != last_broken_ && snap.broken_lines > 0) {
    QStringList p;
    for (const auto& s : snap.problems) p << QString::fromStdString(s);
    emit message(tr("telemetry: %1").arg(p.join("; ")));
  }
  last_broken_ = snap.broken_lines;
}

}  // namespace tessera::gui
