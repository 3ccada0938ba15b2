#pragma once
// What `tessera bench compose` is asked, declared once: fields() drives the command's flags
// (`scene_size` → --scene-size), their help and shown defaults; validate()'s messages name the
// flags. `worker` is the flag the bench passes to the ranks it launches (one layout each). The
// bench itself: bench_compose.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace tessera::bench {

/// One layout of the process grid: data × pipeline × spatial ranks.
struct GridLayoutSpec {
  int dp = 1, pp = 1, sp = 1;
  int ranks() const { return dp * pp * sp; }
  std::string text() const;  ///< "dp2×pp2×sp2"
};

/// "dp2", "pp2xsp2", "dp2xpp2xsp2" (axes in any order, each at most once; x or ×). Throws
/// tessera::Error naming --layouts and the text.
GridLayoutSpec parse_grid_layout(const std::string& text);

struct BenchComposeOptions {
  /// Each single mode, then the combined layouts, of the same model and tile.
  std::vector<std::string> layouts{"dp1", "dp2", "pp2", "sp2", "pp2xsp2", "dp2xpp2xsp2"};
  int64_t tile = 64;         ///< train.tile: the input side of every tile
  int batch = 2;             ///< tiles per replica step (the pipeline's micro-batches: one tile each)
  int steps = 3;
  int threads = 1;           ///< LibTorch threads per rank
  int64_t scene_size = 256;
  std::string work_dir = default_work_dir();
  std::string mpirun = "mpirun";
  std::string worker;        ///< internal: the layout a launched rank runs

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(BenchComposeOptions& o, V& v) {
  v.field("layouts", o.layouts, "Layouts of the grid: dpD, ppK, spP joined by x (pp2xsp2); each on D·K·P ranks");
  v.field("tile", o.tile, "Tile side (train.tile), the same for every layout");
  v.field("batch", o.batch, "Tiles per replica step (one micro-batch each under --pp)");
  v.field("steps", o.steps, "Training steps per layout");
  v.field("threads", o.threads, "LibTorch threads per rank");
  v.field("scene_size", o.scene_size, "Side of the generated training scene");
  v.field("work_dir", o.work_dir, "Where the scene and runs go");
  v.field("mpirun", o.mpirun, "MPI launcher");
  v.field("worker", o.worker, "Internal: the layout a launched rank runs");
}

/// Per-rank memory of each layout: `tessera train` (engine::TrainJob) run on D·K·P ranks with
/// unet-tiny (same padding, group norm) on a generated scene; every rank's peak resident set
/// (VmHWM) beside the planner's prediction for that rank's share (grid_plan.hpp); a table on
/// stdout, then the report as one JSON line. Throws tessera::Error.
void run_bench_compose(const BenchComposeOptions& o);

}  // namespace tessera::bench
