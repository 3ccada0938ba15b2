// tessera-view on run directories written by the real `tessera` command (issue 11, defect 2),
// never on a hand-made folder:
//  - `mpirun -np 2 tessera infer --run-dir RUN` is watched while it runs: the view shows the
//    finished tiles with their labels and greys the rest; the run is killed (SIGKILL) midway
//    and the view equals the finished tiles on disk, pixel for pixel;
//  - the run is resumed to the end and the view equals the output GeoTIFF (read with GDAL);
//  - a `tessera train` run directory opens with its metrics, checkpoints and telemetry.
// Colours are checked at zoom 1 with the overlay opaque and label 0 drawn, so every screen
// pixel is the colour of the label the files hold there (grey 70 where no tile is finished).
// The executables come from the build: TESSERA_EXE, MAKE_SAMPLE_EXE, MPIEXEC_EXE.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include <gdal.h>

#include "gui_test_util.hpp"
#include "main_window.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/run_layout.hpp"

extern char** environ;

namespace tessera::gui {
namespace {
namespace fs = std::filesystem;
using test::TempDir;
using test::wait_until;

constexpr int kSize = 512;  // scene side; tiles of 32 → 256 tiles
const QRgb kUnfinished = qRgb(70, 70, 70);

// ---- child processes ---------------------------------------------------------------------

std::map<pid_t, pid_t> parents() {  // pid → parent pid, from /proc
  std::map<pid_t, pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && state != 'Z' && state != 'X')
      out[std::stoi(name)] = ppid;
  }
  return out;
}

// A command with its descendants (mpirun and its ranks), killable as a whole.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    if (posix_spawn(&pid_, argv[0], nullptr, &attr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawnattr_destroy(&attr);
  }
  ~Child() {
    if (!done_) kill_tree();
  }
  bool started() const { return pid_ > 0; }
  bool finished() {
    if (!done_ && pid_ > 0 && waitpid(pid_, &status_, WNOHANG) == pid_) done_ = true;
    return done_ || pid_ <= 0;
  }
  bool succeeded() { return finished() && done_ && WIFEXITED(status_) && WEXITSTATUS(status_) == 0; }
  /// SIGKILL to the command and every descendant; returns once none of them runs.
  void kill_tree() {
    if (pid_ <= 0 || done_) return;
    std::set<pid_t> tree = {pid_};
    for (bool grew = true; grew;) {
      grew = false;
      for (const auto& [pid, ppid] : parents())
        if (tree.count(ppid) && tree.insert(pid).second) grew = true;
    }
    ::kill(-pid_, SIGKILL);
    for (pid_t p : tree) ::kill(p, SIGKILL);
    waitpid(pid_, &status_, 0);
    done_ = true;
    wait_until([&] {
      const auto running = parents();
      for (pid_t p : tree)
        if (running.count(p)) return false;
      return true;
    }, 30000);
  }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  bool done_ = false;
};

bool run_to_end(const std::vector<std::string>& args, int timeout_ms = 300000) {
  Child c(args);
  return c.started() && wait_until([&] { return c.finished(); }, timeout_ms) && c.succeeded();
}

// ---- rasters read with GDAL --------------------------------------------------------------

struct Labels {
  int w = 0, h = 0;
  std::vector<double> gt = std::vector<double>(6);
  std::vector<uint8_t> v;
  uint8_t at(int x, int y) const { return v[size_t(y) * size_t(w) + size_t(x)]; }
};

Labels read_labels(const std::string& path) {
  Labels l;
  GDALDatasetH ds = GDALOpen(path.c_str(), GA_ReadOnly);
  if (!ds) return l;
  l.w = GDALGetRasterXSize(ds), l.h = GDALGetRasterYSize(ds);
  GDALGetGeoTransform(ds, l.gt.data());
  l.v.resize(size_t(l.w) * size_t(l.h));
  if (GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Read, 0, 0, l.w, l.h, l.v.data(), l.w, l.h, GDT_Byte, 0, 0) != CE_None)
    l.v.clear();
  GDALClose(ds);
  return l;
}

// The scene's labels as the finished tiles on disk say, 255 where no tile is finished.
Labels labels_from_tiles(const TileSetLayout& set, const std::string& scene) {
  Labels out = read_labels(scene);
  std::fill(out.v.begin(), out.v.end(), uint8_t(255));
  for (const std::string& path : set.finished_tiles()) {
    const Labels t = read_labels(path);
    const int x0 = int(std::lround((t.gt[0] - out.gt[0]) / out.gt[1]));
    const int y0 = int(std::lround((t.gt[3] - out.gt[3]) / out.gt[5]));
    for (int y = 0; y < t.h; ++y)
      for (int x = 0; x < t.w; ++x) out.v[size_t(y0 + y) * size_t(out.w) + size_t(x0 + x)] = t.at(x, y);
  }
  return out;
}

// ---- what the viewer shows ---------------------------------------------------------------

struct Viewer {
  MainWindow window;
  RasterView* view = window.rasterView();
  Viewer() {
    window.resize(1100, 800);
    window.show();
    // Opaque overlay, label 0 drawn: a screen pixel is exactly its label's colour.
    window.legend()->setOpacity(1.0);
    window.legend()->setLabelVisible(0, true);
  }
  QRgb colour(uint8_t label) const {
    return label == 255 ? kUnfinished : view->overlayStyle().colors[label];
  }
  // Screen pixels at zoom 1 (four views, one per quadrant) whose colour is not that of
  // `want`'s label; -1 while the view is not loaded.
  int64_t differing(const Labels& want) {
    if (!window.viewReady() || !view->labelMeta() || want.v.empty()) return -1;
    int64_t n = 0;
    const int half = kSize / 4;
    for (int cy = half; cy < kSize; cy += 2 * half)
      for (int cx = half; cx < kSize; cx += 2 * half) {
        view->setView(QPointF(cx, cy), 1.0);
        view->repaint();
        if (view->missingTiles() > 0) return -1;
        const QImage shot = view->grab().toImage();
        for (int y = cy - half; y < cy + half; ++y)
          for (int x = cx - half; x < cx + half; ++x)
            n += shot.pixel(view->imageRectToWidget(QRectF(x, y, 1, 1)).topLeft()) != colour(want.at(x, y));
      }
    return n;
  }
  bool shows(const Labels& want, int timeout_ms = 60000) {
    return wait_until([&] { return differing(want) == 0; }, timeout_ms);
  }
};

std::vector<std::string> infer_command(const std::string& scene, const std::string& output, const std::string& run) {
  return {MPIEXEC_EXE, "--allow-run-as-root", "--oversubscribe", "-np", "2", TESSERA_EXE, "infer",
          "--model", "unet-tiny", "--init", "random", "--seed", "3", "--classes", "4", "--input", scene,
          "--output", output, "--tile", "32", "--run-dir", run, "--no-progress"};
}

struct Scene {
  TempDir dir;
  std::string scene = dir.file("s/scene.tif");
  Scene() {
    setenv("TESSERA_THREADS", "1", 1);
    EXPECT_TRUE(run_to_end({MAKE_SAMPLE_EXE, "--out", dir.file("s"), "--size", std::to_string(kSize), "--only", "scene"}))
        << "tessera-make-sample failed";
  }
};

TEST(RunView, RealInferRunGrowsLiveSurvivesAKillAndEndsEqualToTheOutput) {
  Scene s;
  ASSERT_TRUE(fs::exists(s.scene));
  const std::string run = s.dir.file("run"), output = s.dir.file("out/labels.tif");
  const TileSetLayout set = RunLayout(run).tile_set(output);
  Viewer v;

  // 1. While the run writes tiles, the view shows them; killed midway.
  {
    Child job(infer_command(s.scene, output, run));
    ASSERT_TRUE(job.started());
    ASSERT_TRUE(wait_until([&] { return !set.finished_tiles().empty() || job.finished(); }, 120000));
    v.window.openRun(QString::fromStdString(run));
    // The view grows: it shows two mosaics (of more and more tiles) while the run goes on.
    std::set<std::string> shown;
    ASSERT_TRUE(wait_until([&] {
      if (v.window.showingLiveTiles() && v.view->labelMeta() && v.window.viewReady())
        shown.insert(v.view->labelMeta()->path);
      return shown.size() >= 2 || job.finished();
    }, 120000)) << v.window.lastMessage().toStdString();
    std::printf("[ live    ] %s\n", qPrintable(v.window.lastMessage()));
    ASSERT_FALSE(job.finished()) << "the run ended before it could be killed; make it longer";
    EXPECT_GE(shown.size(), 2u);
    job.kill_tree();
  }
  const size_t finished = set.finished_tiles().size();
  std::printf("[ killed  ] after %zu of 256 tiles\n", finished);
  ASSERT_GT(finished, 0u);
  ASSERT_LT(finished, 256u);
  ASSERT_FALSE(fs::exists(output));
  const Labels partial = labels_from_tiles(set, s.scene);
  EXPECT_TRUE(v.shows(partial)) << v.differing(partial) << " pixels differ from the finished tiles; "
                                << v.window.lastMessage().toStdString();
  EXPECT_TRUE(v.window.showingLiveTiles());

  // 2. Resumed to the end: the view equals the output GeoTIFF, no longer live.
  Child rerun(infer_command(s.scene, output, run));
  std::set<std::string> seen;  // mosaics the view showed while the rerun ran
  ASSERT_TRUE(wait_until([&] {
    if (v.window.showingLiveTiles() && v.view->labelMeta()) seen.insert(v.view->labelMeta()->path);
    return rerun.finished();
  }, 300000));
  ASSERT_TRUE(rerun.succeeded());
  const Labels out = read_labels(output);
  ASSERT_EQ(out.w, kSize);
  std::set<uint8_t> classes(out.v.begin(), out.v.end());
  ASSERT_GE(classes.size(), 2u) << "an output of one class would not show a misplaced tile";
  std::set<QRgb> colours;
  for (uint8_t c : classes) colours.insert(v.colour(c));
  ASSERT_EQ(colours.size(), classes.size()) << "two classes share a colour";
  EXPECT_TRUE(wait_until([&] { return !v.window.showingLiveTiles(); }));
  EXPECT_TRUE(v.shows(out)) << v.differing(out) << " pixels differ from " << output;
  std::printf("[ final   ] %s; mosaics shown while resuming: %zu\n", qPrintable(v.window.lastMessage()),
              seen.size());
  EXPECT_TRUE(v.window.lastMessage().contains("256 of 256 tile(s)")) << v.window.lastMessage().toStdString();
}

TEST(RunView, RealTrainRunOpensWithMetricsCheckpointsAndTelemetry) {
  Scene s;
  // The run directory away from the config and its images (no parent of it holds them): the
  // run's config.yaml must name them itself.
  TempDir runs;
  const std::string config = s.dir.file("train.yaml"), run = runs.file("train-run");
  std::ofstream(config) << "run_dir: " << run << "\n"
                           "model: {preset: unet-tiny, classes: 4, base_filters: 4}\n"
                           "data:\n  pairs: [{image: s/scene.tif, labels: s/scene_labels.tif}]\n"
                           "  class_names: [background, building, road, water]\n"
                           "train: {tile: 32, batch: 2, steps: 3, seed: 1, checkpoint_every: 2}\n";
  ASSERT_TRUE(run_to_end({MPIEXEC_EXE, "--allow-run-as-root", "--oversubscribe", "-np", "2", TESSERA_EXE, "train",
                          "--config", config, "--no-progress"}));
  {
    Viewer v;
    v.window.openRun(QString::fromStdString(run));
    ASSERT_TRUE(wait_until([&] { return v.window.lastMessage().contains("metrics.jsonl"); }))
        << v.window.lastMessage().toStdString();
    const QString m = v.window.lastMessage();
    std::printf("[ train   ] %s\n", qPrintable(m));
    EXPECT_TRUE(m.contains("metrics.jsonl 3 line(s)")) << m.toStdString();
    EXPECT_TRUE(m.contains("last.pt")) << m.toStdString();
    EXPECT_TRUE(m.contains("telemetry 2 rank(s)")) << m.toStdString();
    EXPECT_FALSE(v.window.showingLiveTiles());
    // The training image named by config.yaml is shown; the devices panel lists both ranks.
    EXPECT_TRUE(wait_until([&] { return v.view->hasImage() && v.window.viewReady(); }));
    EXPECT_EQ(v.view->meta().path, s.scene);
    EXPECT_TRUE(wait_until([&] { return v.window.devices()->rowOfRank(1) >= 0; }));
  }
  // The image gone: the status line names it, and so does the view (not a blank "Open an image").
  fs::rename(s.scene, s.scene + ".moved");
  Viewer v;
  v.window.openRun(QString::fromStdString(run));
  const std::string said = "names the image " + s.scene + ", which does not exist";
  ASSERT_TRUE(wait_until([&] { return v.window.lastMessage().contains(QString::fromStdString(said)); }))
      << v.window.lastMessage().toStdString();
  EXPECT_TRUE(v.view->placeholder().contains(QString::fromStdString(said))) << v.view->placeholder().toStdString();
}

// The one layout: paths the writers use, listings that skip temporaries.
TEST(RunLayout, NamesEveryFileOfARunAndListsOnlyFinishedOnes) {
  TempDir dir;
  const RunLayout run(dir.path.string());
  EXPECT_EQ(run.config(), dir.file("config.yaml"));
  EXPECT_EQ(run.metrics(), dir.file("metrics.jsonl"));
  EXPECT_EQ(run.last_checkpoint(), dir.file("checkpoints/last.pt"));
  EXPECT_EQ(run.best_checkpoint(), dir.file("checkpoints/best.pt"));
  EXPECT_EQ(run.step_checkpoint(12), dir.file("checkpoints/step-000012.pt"));
  EXPECT_EQ(run.telemetry(3), dir.file("telemetry/rank-3.jsonl"));
  const TileSetLayout set = run.tile_set("/elsewhere/out/labels.tif");
  EXPECT_EQ(set.dir(), dir.file("tiles/labels.tif"));
  EXPECT_EQ(set.tile(42, ".tif"), dir.file("tiles/labels.tif/tile-0000042.tif"));
  fs::create_directories(set.dir());
  fs::create_directories(run.checkpoints_dir());
  for (const std::string& f : {set.tile(2, ".tif"), set.tile(1, ".tif"), set.tile(3, ".tif") + ".partial-77",
                               set.mosaic(), run.step_checkpoint(2), run.step_checkpoint(10),
                               run.step_checkpoint(4) + ".partial", run.last_checkpoint()})
    std::ofstream(f) << "x";
  EXPECT_EQ(set.finished_tiles(), (std::vector<std::string>{set.tile(1, ".tif"), set.tile(2, ".tif")}));
  EXPECT_EQ(run.step_checkpoints(), (std::vector<std::string>{run.step_checkpoint(2), run.step_checkpoint(10)}));
  EXPECT_EQ(run.tile_sets().size(), 1u);
  EXPECT_FALSE(set.read_record());
  set.write_record({"/data/scene.tif", "/out/labels.tif", 256});
  const auto record = set.read_record();
  ASSERT_TRUE(record);
  EXPECT_EQ(record->input, "/data/scene.tif");
  EXPECT_EQ(record->tiles, 256);
  std::ofstream(set.record()) << "{\"input\": 3";
  EXPECT_THROW(set.read_record(), Error);
  EXPECT_EQ(RunLayout::telemetry_rank("rank-12.jsonl"), 12);
  EXPECT_FALSE(RunLayout::telemetry_rank("rank-12.jsonl.partial"));
}

}  // namespace
}  // namespace tessera::gui
