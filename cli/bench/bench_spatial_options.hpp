#pragma once
// What `tessera bench spatial` is asked, declared once: fields() drives the command's flags
// (`memory_cap` → --memory-cap), their help and shown defaults; validate()'s messages name the
// flags. `worker` and `worker_mesh` are the flags the bench passes to the workers it launches
// (hidden from --help). The network is not a field: the command resolves it from --model and
// the model flags (spatial_bench_model). The bench itself: bench_spatial.cpp (the driver) and
// bench_spatial_worker.cpp (one layout under mpirun).
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/unet_spec.hpp"

namespace tessera::cli {
struct ModelFlags;
}

namespace tessera::bench {

struct BenchSpatialOptions {
  /// Not a flag of its own: --model PRESET and the model flags (spatial_bench_model).
  UNetOptions model = unet_preset("unet-small").with_padding(Padding::kSame).with_norm(Norm::kGroup);
  std::string model_preset = "unet-small";  ///< its preset name, for the report and the launched commands
  int64_t side = 256;                       ///< input tile side of the memory and time table
  std::vector<int> ranks{1, 2, 4};          ///< layouts split along the first axis
  std::vector<std::string> mesh{"2x2"};     ///< further layouts; "" for none
  int batch = 1;
  int steps = 3;
  int threads = 1;          ///< per rank
  double memory_cap = 0;    ///< MiB per rank for the largest-side search; 0: no search
  int64_t max_side = 2048;  ///< the largest side that search tries
  bool pipeline = false;    ///< with memory_cap: bench pipeline's search too
  std::string mpirun = "mpirun";
  std::string worker;       ///< internal: "measure" or "cap" in a launched worker
  std::string worker_mesh;  ///< internal: the worker's mesh

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(BenchSpatialOptions& o, V& v) {
  v.field("side", o.side, "Input tile side of the memory and time table (split into blocks)");
  v.field("ranks", o.ranks, "Ranks P, each layout split along the first axis");
  v.field("mesh", o.mesh, "Further layouts as meshes (2x2, 2x2x1); '' for none");
  v.field("batch", o.batch, "Tiles per step");
  v.field("steps", o.steps, "Timed steps per layout (after one warm-up)");
  v.field("threads", o.threads, "LibTorch threads per rank");
  v.field("memory_cap", o.memory_cap, "MiB per rank: the largest trainable input side for each P of --ranks (0: none)");
  v.field("max_side", o.max_side, "Largest input side --memory-cap tries");
  v.field("pipeline", o.pipeline, "With --memory-cap: also run `tessera bench pipeline --memory-cap` on the largest P");
  v.field("mpirun", o.mpirun, "MPI launcher");
  v.field("worker", o.worker, "Internal: what a launched worker measures (measure, cap)");
  v.field("worker_mesh", o.worker_mesh, "Internal: the launched worker's mesh");
}

/// The bench's network from the model flags: the preset and the overrides given, with `same`
/// padding and group norm unless --padding / --norm say otherwise; validated.
UNetOptions spatial_bench_model(const cli::ModelFlags& flags);

/// Without `worker`: every layout (P of `ranks` along the first axis, then `mesh`) launched
/// under mpirun, its per-rank peak, step time and halo bytes against the planner's, and with
/// memory_cap the largest side per P; a table on stdout, then the report as one JSON line.
/// With it: one layout (a launched worker), its JSON line from rank 0. Throws tessera::Error.
void run_bench_spatial(const BenchSpatialOptions& o);

}  // namespace tessera::bench
