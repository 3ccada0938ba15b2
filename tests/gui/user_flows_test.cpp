// The two first-contact flows of issue 33 through the real executables, ending in the viewer:
//  - the analyst: own class names and colours set once (data.classes) and class 0 a real
//    class (data.background: none): the label GeoTIFF `tessera infer` writes opens with class 0
//    checked, and every label shown is named;
//  - the clinician: a CT model trained with data.classes, run by `tessera infer` on the DICOM
//    series into a DICOM SEG: the SEG opens over the series with the classes' names in the
//    legend (`tessera-view ct_dicom --labels seg.dcm`).
// The executables come from the build: TESSERA_EXE, MAKE_SAMPLE_EXE.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <QTableWidget>

#include "gui_test_util.hpp"
#include "main_window.hpp"

namespace tessera::gui {
namespace {
using test::TempDir;
using test::wait_until;

// Runs `args` (one process, one thread) with its output in `log`; the log's text on failure.
std::string run(const std::string& args, const std::string& log) {
  const std::string command = "TESSERA_THREADS=1 " + args + " > " + log + " 2>&1";
  if (std::system(command.c_str()) == 0) return "";
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return command + " failed:\n" + text.str();
}

// The names the legend shows, by label; only labels present in the labels get a row.
std::map<int, std::string> legend_names(MainWindow& w) {
  std::map<int, std::string> out;
  QTableWidget* t = w.legend()->table();
  for (int r = 0; r < t->rowCount(); ++r)
    out[t->item(r, 0)->data(Qt::UserRole).toInt()] = t->item(r, 1)->text().toStdString();
  return out;
}

TEST(UserFlows, AnalystLabelsOpenWithClassZeroCheckedAndNamed) {
  TempDir dir;
  const std::string s = dir.file("s");
  ASSERT_EQ(run(std::string(MAKE_SAMPLE_EXE) + " --out " + s + " --size 256 --only scene --targets 0", dir.file("gen.log")),
            "");
  const std::string config = dir.file("own.yaml");
  std::ofstream(config) << "run_dir: " << dir.file("run") << "\n"
                        << "model: {preset: unet-tiny, base_filters: 4, classes: 4}\n"
                           "data:\n  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]\n"
                           "  classes: [{name: water, color: '#1f78b4'}, {name: building}, {name: road}, {name: field}]\n"
                           "  background: none\n"
                           "train: {tile: 64, batch: 1, steps: 2, seed: 1}\n";
  ASSERT_EQ(run(std::string(TESSERA_EXE) + " train --no-progress --config " + config, dir.file("train.log")), "");
  const std::string labels = dir.file("labels.tif");
  ASSERT_EQ(run(std::string(TESSERA_EXE) + " infer --no-progress --tile 64 --checkpoint " + dir.file("run") +
                    "/checkpoints/last.pt --input " + s + "/scene.tif --output " + labels,
                dir.file("infer.log")),
            "");
  MainWindow window;
  window.resize(900, 700);
  window.show();
  window.openImage(QString::fromStdString(s + "/scene.tif"), QString::fromStdString(labels));
  ASSERT_TRUE(wait_until([&] { return window.viewReady() && !legend_names(window).empty(); }))
      << window.lastMessage().toStdString();
  EXPECT_TRUE(window.legend()->style().visible[0]) << "data.background none: class 0 (water) starts checked";
  const std::set<std::string> named{"water", "building", "road", "field"};
  for (const auto& [label, name] : legend_names(window)) EXPECT_EQ(named.count(name), 1u) << label << " " << name;
}

TEST(UserFlows, ClinicianSegOpensOverItsSeriesWithTheClassNames) {
  TempDir dir;
  const std::string s = dir.file("s");
  ASSERT_EQ(run(std::string(MAKE_SAMPLE_EXE) + " --out " + s + " --only ct --ct-size 32 --targets 0", dir.file("gen.log")),
            "");
  const std::string config = dir.file("ct.yaml");
  std::ofstream(config) << "run_dir: " << dir.file("run") << "\n"
                        << "model: {preset: unet3d-tiny, base_filters: 4, classes: 3}\n"
                           "data:\n  pairs: [{image: s/ct.nii.gz, labels: s/ct_labels.nii.gz}]\n"
                           "  classes: [{name: background}, {name: liver, color: '#dd8265'}, {name: kidney}]\n"
                           "  normalization: {kind: ct, window: [-250, 750]}\n"
                           "train: {tile: 8, batch: 1, steps: 2, seed: 1}\n";
  ASSERT_EQ(run(std::string(TESSERA_EXE) + " train --no-progress --config " + config, dir.file("train.log")), "");
  const std::string seg = dir.file("seg.dcm");
  ASSERT_EQ(run(std::string(TESSERA_EXE) + " infer --no-progress --checkpoint " + dir.file("run") +
                    "/checkpoints/last.pt --input " + s + "/ct_dicom --output " + seg,
                dir.file("infer.log")),
            "");
  MainWindow window;
  window.resize(1100, 800);
  window.show();
  window.openImage(QString::fromStdString(s + "/ct_dicom"), QString::fromStdString(seg));
  ASSERT_TRUE(wait_until([&] { return window.volumeViewer()->volume() != nullptr && !window.isBusy(); }))
      << window.lastMessage().toStdString();
  ASSERT_FALSE(window.volumeViewer()->volume()->labels.empty())
      << window.volumeViewer()->volume()->label_message.toStdString();
  ASSERT_TRUE(wait_until([&] { return !legend_names(window).empty(); })) << window.lastMessage().toStdString();
  int segments = 0;
  for (const auto& [label, name] : legend_names(window)) {
    if (label == 0) continue;
    ++segments;
    EXPECT_TRUE(name == "liver" || name == "kidney") << "segment " << label << " is '" << name << "'";
  }
  EXPECT_GT(segments, 0) << "the SEG's segments are in the legend";
}

}  // namespace
}  // namespace tessera::gui
