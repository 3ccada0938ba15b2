// tessera bench compose: per-rank memory of the process grid's layouts — each single mode (dp,
// pp, sp) and the combined ones (pp × sp, dp × pp × sp) — for the same model, tile and batch.
// Run without mpirun; for every layout it launches
//   mpirun -np D·K·P tessera bench compose --worker dp2xpp2xsp2 …
// whose ranks run `tessera train` itself (engine::TrainJob, unet-tiny with `same` padding and
// group norm, on a generated scene) with --dp D --pp K --sp P, then report every rank's peak
// resident set (VmHWM: the whole command, LibTorch and MPI included). Beside each rank's figure
// the planner's prediction for that layout (grid_plan.hpp layout_rank_bytes: the memory-aware
// stage balance over the largest block, the decomposition's tensors, the 256 MiB baseline; for
// K = 1 the batch's tiles all in flight). Through `train` every pipeline rank also keeps the
// whole model and optimiser (16 B per parameter outside its stage), which the stage model leaves
// out; with unet-tiny that is a few MiB.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "bench_compose_options.hpp"
#include "child_process.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/layer_sequence.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/engine/train_job.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/parallel/modes/spatial.hpp"
#include "tessera/parallel/plan/grid_plan.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera::bench {

std::string GridLayoutSpec::text() const {
  std::string t;
  for (const auto& [axis, n] : {std::pair{"dp", dp}, {"pp", pp}, {"sp", sp}})
    if (n > 1 || (axis == std::string("dp") && pp == 1 && sp == 1)) t += (t.empty() ? "" : "×") + std::string(axis) + std::to_string(n);
  return t;
}

GridLayoutSpec parse_grid_layout(const std::string& text) {
  GridLayoutSpec g;
  std::string rest = text;
  for (size_t at; (at = rest.find("×")) != std::string::npos;) rest.replace(at, std::string("×").size(), "x");
  bool seen[3] = {false, false, false};
  size_t from = 0;
  while (from <= rest.size()) {
    const size_t to = std::min(rest.find('x', from), rest.size());
    const std::string part = rest.substr(from, to - from);
    const int axis = part.rfind("dp", 0) == 0 ? 0 : part.rfind("pp", 0) == 0 ? 1 : part.rfind("sp", 0) == 0 ? 2 : -1;
    size_t used = 0;
    int n = 0;
    try {
      n = axis < 0 ? 0 : std::stoi(part.substr(2), &used);
    } catch (const std::exception&) {
      n = 0;
    }
    if (axis < 0 || n < 1 || used + 2 != part.size() || seen[axis])
      throw Error("--layouts: '" + text + "' is not dpD, ppK, spP joined by x, each axis once (e.g. dp2xpp2xsp2)");
    seen[axis] = true;
    (axis == 0 ? g.dp : axis == 1 ? g.pp : g.sp) = n;
    from = to + 1;
  }
  return g;
}

void BenchComposeOptions::validate() const {
  if (layouts.empty()) throw Error("--layouts: give at least one layout");
  for (const std::string& l : layouts) parse_grid_layout(l);
  for (const auto& [flag, value] : {std::pair{"--batch", batch}, {"--steps", steps}, {"--threads", threads}})
    if (value < 1) throw Error(std::string(flag) + ": must be >= 1, got " + std::to_string(value));
  if (tile < 8 || tile % 8 != 0) throw Error("--tile: must be a positive multiple of 8 (unet-tiny's alignment), got " + std::to_string(tile));
  if (scene_size < tile) throw Error("--scene-size: must be >= --tile (" + std::to_string(tile) + ")");
}

namespace {

namespace fs = std::filesystem;

fs::path config_path(const BenchComposeOptions& o) { return fs::path(o.work_dir) / "compose" / "compose.yaml"; }

UNetOptions bench_model() { return unet_preset("unet-tiny").with_padding(Padding::kSame).with_norm(Norm::kGroup).with_classes(4); }

// The one configuration every layout trains (Adam: the stage model counts its two moments per
// parameter; the measurement is what train holds).
void write_config(const BenchComposeOptions& o, const std::string& scene) {
  fs::create_directories(config_path(o).parent_path());
  std::ofstream y(config_path(o));
  const std::string labels = (fs::path(scene).parent_path() / "scene_labels.tif").string();
  y << "model: {preset: unet-tiny, classes: 4, norm: group, padding: same}\n"
    << "data:\n  pairs: [{image: " << scene << ", labels: " << labels << "}]\n"
    << "train: {tile: " << o.tile << ", batch: " << o.batch << ", steps: " << o.steps
    << ", seed: 3, optimizer: adam, learning_rate: 0.001, loss: {kind: ce}, validate: false, checkpoint_every: "
    << o.steps + 1 << "}\n";  // ce: the pipeline splits it over micro-batches exactly
}

// A launched rank: train the layout, then every rank's peak resident bytes, printed by rank 0.
void run_worker(const BenchComposeOptions& o) {
  const GridLayoutSpec g = parse_grid_layout(o.worker);
  engine::RunConfig c = engine::load_run_config(config_path(o).string());
  c.parallel.dp = g.dp;
  c.parallel.pp = g.pp;
  c.parallel.sp = g.sp;
  c.train.run_dir = (config_path(o).parent_path() / ("run-" + o.worker)).string();
  c.train.progress = false;
  engine::TrainRequest request;
  request.config = config_path(o).string();
  request.threads = o.threads;
  engine::TrainJob(c, request).run();
  parallel::Communicator& world = parallel::world();
  const torch::Tensor all = world.allgather(torch::tensor({double(peak_resident_bytes())}, torch::kDouble));
  if (world.rank() != 0) return;
  std::vector<int64_t> peaks;
  for (int r = 0; r < world.size(); ++r) peaks.push_back(int64_t(all[r][0].item<double>()));
  std::printf("%s\n", nlohmann::json{{"layout", o.worker}, {"peak_bytes", peaks}}.dump().c_str());
}

// The planner's per-rank prediction for the layout (grid_plan.hpp).
int64_t predicted(const BenchComposeOptions& o, const GridLayoutSpec& g) {
  const UNetOptions model = bench_model();
  auto po = parallel::PlanOptions(model, {o.scene_size, o.scene_size}, g.ranks(), int64_t{1} << 40);
  // One stage holds the whole batch at once (GPipe over M = batch tiles); a pipeline runs 1F1B,
  // train's default, over one tile per micro-batch.
  po.with_schedule(g.pp == 1 ? PipelineScheduleKind::kGPipe : PipelineScheduleKind::kOneFOneB);
  const std::vector<int> mesh = g.sp > 1 ? SpatialMesh::along_first_axis(g.sp, 2).parts : std::vector<int>{};
  return parallel::layout_rank_bytes(po, unet_layer_sequence(model, o.tile), 1, g.pp, mesh, o.batch);
}

}  // namespace

void run_bench_compose(const BenchComposeOptions& o) {
  o.validate();
  if (!o.worker.empty()) return run_worker(o);
  write_config(o, bench_scene(o.work_dir, o.scene_size));
  std::printf("bench compose: unet-tiny (same, group norm), tile %lld, batch %d per replica, %d steps, %d thread(s) per "
              "rank; peak resident set per rank (VmHWM of the whole train command) and the planner's prediction\n",
              (long long)o.tile, o.batch, o.steps, o.threads);
  std::printf("  %-14s %5s  %-44s %10s %10s\n", "layout", "ranks", "measured MiB per rank", "max MiB", "predicted");
  nlohmann::json report{{"tile", o.tile}, {"batch", o.batch}, {"steps", o.steps}, {"layouts", nlohmann::json::array()}};
  for (const std::string& text : o.layouts) {
    const GridLayoutSpec g = parse_grid_layout(text);
    fs::remove_all(config_path(o).parent_path() / ("run-" + g.text()));  // here: the ranks would race
    std::vector<std::string> args{"bench", "compose", "--worker", g.text(), "--tile", std::to_string(o.tile), "--batch",
                                  std::to_string(o.batch), "--steps", std::to_string(o.steps), "--threads",
                                  std::to_string(o.threads), "--scene-size", std::to_string(o.scene_size), "--work-dir",
                                  o.work_dir};
    const nlohmann::json j =
        cli::last_json(cli::run_ranks(o.mpirun, g.ranks(), args, "bench compose: " + g.text()).out, "bench compose " + g.text());
    const auto peaks = j.at("peak_bytes").get<std::vector<int64_t>>();
    std::string each;
    for (int64_t p : peaks) each += fmt::format("{}{:.0f}", each.empty() ? "" : " ", mib(p));
    const int64_t top = *std::max_element(peaks.begin(), peaks.end()), guess = predicted(o, g);
    std::printf("  %-14s %5d  %-44s %10.0f %10.0f\n", g.text().c_str(), g.ranks(), each.c_str(), mib(top), mib(guess));
    std::fflush(stdout);
    report["layouts"].push_back({{"layout", g.text()}, {"ranks", g.ranks()}, {"peak_bytes", peaks}, {"predicted_bytes", guess}});
  }
  std::printf("%s\n", report.dump().c_str());
}

}  // namespace tessera::bench
