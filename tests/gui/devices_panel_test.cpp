// The devices panel shows the figures of a telemetry file written here, marks a stale rank
// (also in its pixels), and reports broken lines instead of failing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iomanip>

#include <QDateTime>
#include <QTableWidget>

#include "devices_panel.hpp"
#include "tessera/core/error.hpp"
#include "gui_test_util.hpp"

namespace tessera::gui {
namespace {
using test::TempDir;
using test::wait_until;

TEST(Telemetry, ParsesALineAndRejectsBrokenOnes) {
  const TelemetrySample s = decode_telemetry_line(
      R"({"time": 1700000000.5, "rank": 3, "host": "n1", "device": "cuda:1", "mem_used_bytes": 1073741824,
          "mem_total_bytes": 17179869184, "util_pct": 42, "phase": "infer", "step": 7, "tiles_done": 99})");
  EXPECT_EQ(s.rank, 3);
  EXPECT_DOUBLE_EQ(s.time, 1700000000.5);
  EXPECT_EQ(s.device, "cuda:1");
  EXPECT_EQ(s.tiles_done, 99);
  EXPECT_THROW(decode_telemetry_line(R"({"time": 1, "rank": )"), Error);
  EXPECT_THROW(decode_telemetry_line("garbage"), Error);
  EXPECT_THROW(decode_telemetry_line(R"({"time": 1, "rank": "zero"})"), Error);
  const TelemetrySample iso = decode_telemetry_line(R"({"time": "2026-01-01T00:00:00Z", "rank": 0})");
  EXPECT_DOUBLE_EQ(iso.time, 1767225600.0);
  EXPECT_EQ(iso.stage.stage, -1);  // not a pipeline rank
  const TelemetrySample stage = decode_telemetry_line(R"({"time": 2, "rank": 1, "pipeline_stage": 1, "stage_step_s": 0.25})");
  EXPECT_EQ(stage.stage.stage, 1);
  EXPECT_DOUBLE_EQ(stage.stage.step_seconds, 0.25);
}

TEST(DevicesPanel, ShowsTelemetryFiguresAndMarksAStaleRank) {
  TempDir run;
  std::filesystem::create_directories(run.path / "telemetry");
  const double now = double(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
  {
    std::ofstream r0(run.path / "telemetry" / "rank-0.jsonl");
    r0 << std::fixed;
    for (int i = 0; i < 5; ++i)
      r0 << R"({"time": )" << now - 4 + i << R"(, "rank": 0, "host": "node7", "device": "cuda:0", )"
         << R"("mem_used_bytes": )" << (2ll << 30) << R"(, "mem_total_bytes": )" << (16ll << 30)
         << R"(, "util_pct": )" << 55 + 5 * i << R"(, "phase": "train", "step": )" << 120 + i
         << R"(, "tiles_done": )" << 480 + 4 * i << R"(, "temperature_c": 71, "power_w": 250})" << "\n";
    std::ofstream r1(run.path / "telemetry" / "rank-1.jsonl");
    r1 << std::fixed;
    r1 << R"({"time": )" << now - 3600 << R"(, "rank": 1, "host": "node8", "device": "cuda:0", )"
       << R"("mem_used_bytes": 1073741824, "mem_total_bytes": 17179869184, "util_pct": 12, "phase": "infer", )"
       << R"("step": 3, "tiles_done": 10, "pipeline_stage": 1, "stage_step_s": 0.25})" << "\n"
       << "{not json at all\n"
       << R"({"time": )" << now - 3590 << R"(, "rank": 1, "mem_used)";  // half-written last line
  }
  DevicesPanel panel;
  panel.resize(1000, 300);
  panel.show();
  QString message;
  QObject::connect(&panel, &DevicesPanel::message, [&](const QString& m) { message = m; });
  int refreshed = 0;
  QObject::connect(&panel, &DevicesPanel::refreshed, [&] { ++refreshed; });
  panel.setRunDirectory(QString::fromStdString(run.path.string()));
  ASSERT_TRUE(wait_until([&] { return panel.rowOfRank(0) >= 0 && panel.rowOfRank(1) >= 0; }));
  QTableWidget* t = panel.table();
  const int r0 = panel.rowOfRank(0), r1 = panel.rowOfRank(1);
  EXPECT_EQ(t->item(r0, 1)->text(), "node7 / cuda:0");
  EXPECT_EQ(t->item(r0, 2)->text(), "2.00 / 16.00");
  EXPECT_EQ(t->item(r0, 3)->text(), "75");
  EXPECT_EQ(t->item(r0, 4)->text(), "71 °C  250 W");
  EXPECT_EQ(t->item(r0, 5)->text(), "train");
  EXPECT_EQ(t->item(r0, 6)->text(), "124");
  EXPECT_EQ(t->item(r0, 7)->text(), "496");
  EXPECT_EQ(t->item(r1, 4)->text(), "");  // not reported: left empty
  EXPECT_EQ(t->item(r1, 5)->text(), QString::fromUtf8("infer · stage 1 (0.25 s/step)"));  // a pipeline rank
  EXPECT_EQ(t->item(r1, 2)->text(), "1.00 / 16.00");
  EXPECT_FALSE(panel.isStale(0));
  EXPECT_TRUE(panel.isStale(1));
  EXPECT_TRUE(t->item(r1, 9)->text().startsWith("STALE"));
  // The half-written last line is not judged until it ends: one broken line so far.
  EXPECT_TRUE(message.contains("1 broken line(s)")) << message.toStdString();
  EXPECT_TRUE(message.contains("line 2: not JSON")) << message.toStdString();  // which line, and why
  EXPECT_TRUE(message.contains("rank-1.jsonl")) << message.toStdString();
  // Pixels: the stale rank's status cell is red, the live one's is not.
  const QImage img = t->viewport()->grab().toImage();
  const QRect stale_cell = t->visualItemRect(t->item(r1, 9)), live_cell = t->visualItemRect(t->item(r0, 9));
  EXPECT_EQ(img.pixel(stale_cell.left() + 3, stale_cell.center().y()), qRgb(183, 28, 28));
  EXPECT_NE(img.pixel(live_cell.left() + 3, live_cell.center().y()), qRgb(183, 28, 28));
  // This machine: its GPUs through NVML, or (as here, without a driver) the host with a note.
  const int local = panel.rowOfRank(-1);
  ASSERT_GE(local, 0);
  if (!panel.localNote().isEmpty()) {
    EXPECT_TRUE(t->item(local, 1)->text().endsWith("/ cpu"));
  }
  // Live updates: a new sample for rank 1 clears its stale marker on the next refresh.
  {
    std::ofstream r1(run.path / "telemetry" / "rank-1.jsonl", std::ios::app);
    r1 << std::fixed;
    r1 << "\n" << R"({"time": )" << now << R"(, "rank": 1, "util_pct": 90, "phase": "infer", "step": 4})" << "\n";
  }
  const int before = refreshed;
  panel.refresh();
  ASSERT_TRUE(wait_until([&] { return refreshed > before && !panel.isStale(1); }));
  // Now that the half-written line has ended (still not JSON), it counts as broken too.
  EXPECT_TRUE(message.contains("2 broken line(s)")) << message.toStdString();
}

// A finished CPU inference run: each rank's own process memory and CPU (not the host's shared
// figures), its tiles in the step column, "done" (green, not a red STALE) an hour later.
TEST(DevicesPanel, FinishedCpuRanksShowDoneTheirOwnProcessAndTiles) {
  TempDir run;
  std::filesystem::create_directories(run.path / "telemetry");
  const double now = double(QDateTime::currentMSecsSinceEpoch()) / 1000.0;
  const int64_t host_used = int64_t(1.6 * double(1ll << 30)), host_total = int64_t(15.6 * double(1ll << 30));
  {
    std::ofstream r0(run.path / "telemetry" / "rank-0.jsonl");
    r0 << std::fixed;
    for (const char* phase : {"infer", "done"})
      r0 << R"({"time": )" << now - 3600 << R"(, "rank": 0, "host": "n1", "device": "cpu", "mem_used_bytes": )" << host_used
         << R"(, "mem_total_bytes": )" << host_total << R"(, "util_pct": 55, "process_rss_bytes": )"
         << int64_t(0.57 * double(1ll << 30)) << R"(, "process_cpu_pct": 180, "phase": ")" << phase
         << R"(", "step": 0, "tiles_done": 412})" << "\n";
    // An older writer: no process fields; still inferring, recently.
    std::ofstream r1(run.path / "telemetry" / "rank-1.jsonl");
    r1 << std::fixed << R"({"time": )" << now << R"(, "rank": 1, "host": "n1", "device": "cpu", "mem_used_bytes": )"
       << host_used << R"(, "mem_total_bytes": )" << host_total
       << R"(, "util_pct": 55, "phase": "infer", "step": 0, "tiles_done": 40})" << "\n";
  }
  DevicesPanel panel;
  panel.resize(1000, 300);
  panel.show();
  panel.setRunDirectory(QString::fromStdString(run.path.string()));
  ASSERT_TRUE(wait_until([&] { return panel.rowOfRank(0) >= 0 && panel.rowOfRank(1) >= 0; }));
  QTableWidget* t = panel.table();
  const int r0 = panel.rowOfRank(0), r1 = panel.rowOfRank(1);
  EXPECT_EQ(t->item(r0, 2)->text(), "0.57 / 15.60");  // the process, of the host's memory
  EXPECT_EQ(t->item(r0, 3)->text(), "180");           // the process's CPU, % of a core
  EXPECT_EQ(t->item(r0, 6)->text(), "412 tiles");
  EXPECT_EQ(t->item(r0, 9)->text(), "done");
  EXPECT_TRUE(panel.isDone(0));
  EXPECT_FALSE(panel.isStale(0));
  EXPECT_EQ(t->item(r1, 2)->text(), "1.60 / 15.60 (host)");
  EXPECT_EQ(t->item(r1, 3)->text(), "55 (host)");
  EXPECT_EQ(t->item(r1, 6)->text(), "40 tiles");
  EXPECT_EQ(t->item(r1, 9)->text(), "ok");
  // Pixels: the finished rank's status cell is green, not red (no row selected to tint it).
  t->clearSelection();
  t->setCurrentItem(nullptr);
  const QImage img = t->viewport()->grab().toImage();
  const QRect done_cell = t->visualItemRect(t->item(r0, 9));
  EXPECT_EQ(img.pixel(done_cell.right() - 3, done_cell.center().y()), qRgb(46, 125, 50));  // beside the text
}

}  // namespace
}  // namespace tessera::gui
