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

// What a rank's row shows as its memory and load: on a GPU the device's (its memory is the
// rank's alone to run out of), on a CPU the rank's own process (RSS of the host's memory, CPU
// time in % of a core), since every rank of a host shares the host's figures. Samples of an
// older writer without the process fields fall back to the host's, said with "(host)".
struct RankLoad {
  double used = 0, total = 0;  // bytes
  double util = 0;             // %
  bool host_memory = false, host_util = false;
};

RankLoad rank_load(const TelemetrySample& s, bool is_local) {
  RankLoad l{double(s.mem_used_bytes), double(s.mem_total_bytes), s.util_pct};
  if (is_local || s.device.rfind("cuda", 0) == 0) return l;
  if (s.process_rss_bytes > 0) l.used = double(s.process_rss_bytes);
  else l.host_memory = true;
  if (s.process_cpu_pct) l.util = *s.process_cpu_pct;
  else l.host_util = true;
  return l;
}

const QColor kStaleColor(183, 28, 28), kDoneColor(46, 125, 50);

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
  table_->horizontalHeaderItem(kMemory)->setToolTip(
      tr("GPU ranks: the device's memory in use / its total. CPU ranks: the rank's own process (resident set) / the host's memory"));
  table_->horizontalHeaderItem(kUtil)->setToolTip(
      tr("GPU ranks: the device's utilisation. CPU ranks: the rank's own CPU time, % of one core"));
  table_->horizontalHeaderItem(kStep)->setToolTip(tr("Training: the last step started. Inference: the tiles this rank finished"));
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

bool DevicesPanel::isDone(int rank) const {
  const int r = rowOfRank(rank);
  return r >= 0 && table_->item(r, kStatus)->data(Qt::UserRole + 1).toBool();
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
    const RankLoad load = rank_load(s, is_host);
    table_->setItem(row, kMemory, new QTableWidgetItem(QStringLiteral("%1 / %2%3").arg(gib(load.used), gib(load.total),
                                                                                         load.host_memory ? tr(" (host)") : QString())));
    table_->setItem(row, kUtil, new QTableWidgetItem(QString::number(load.util, 'f', 0) + (load.host_util ? tr(" (host)") : QString())));
    QStringList extra;
    if (s.temperature_c) extra << QStringLiteral("%1 °C").arg(*s.temperature_c, 0, 'f', 0);
    if (s.power_w) extra << QStringLiteral("%1 W").arg(*s.power_w, 0, 'f', 0);
    table_->setItem(row, kSensors, new QTableWidgetItem(extra.join("  ")));
    QString phase = QString::fromStdString(s.phase);
    if (s.stage.stage >= 0)  // a pipeline rank: which stage, and its last step
      phase += tr(" · stage %1 (%2 s/step)").arg(s.stage.stage).arg(s.stage.step_seconds, 0, 'f', 2);
    table_->setItem(row, kPhase, new QTableWidgetItem(phase));
    // Inference has no steps: its progress is the tiles this rank finished.
    const bool tiles = s.phase == "infer" || s.phase == "assemble" || (s.step == 0 && s.tiles_done > 0);
    table_->setItem(row, kStep, new QTableWidgetItem(is_host ? QString()
                                                     : tiles ? tr("%1 tiles").arg(s.tiles_done)
                                                             : QString::number(s.step)));
    table_->setItem(row, kTiles, new QTableWidgetItem(is_host ? QString() : QString::number(s.tiles_done)));
    std::vector<double> util, mem;
    for (const auto& h : history) {
      const RankLoad l = rank_load(h, is_host);
      util.push_back(l.util / 100.0);
      mem.push_back(l.total > 0 ? l.used / l.total : 0.0);
    }
    table_->setCellWidget(row, kHistory, new Sparkline(util, mem, table_));
    // A rank whose last sample says it finished is done, however long ago; one that stopped
    // reporting without saying so is stale.
    const double age = now - s.time;
    const bool done = !is_host && s.phase == "done";
    const bool stale = !is_host && !done && age > stale_seconds_;
    auto* status = new QTableWidgetItem(done ? tr("done") : stale ? tr("STALE (%1 s)").arg(qRound64(age)) : tr("ok"));
    status->setData(Qt::UserRole, stale);
    status->setData(Qt::UserRole + 1, done);
    if (stale || done) {
      status->setBackground(stale ? kStaleColor : kDoneColor);
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
