#pragma once
// What `tessera bench train` is asked, declared once: fields() drives the command's flags
// (`global_batch` → --global-batch; --no-ref and --no-bf16 turn off the parts that default
// to on), their help and shown defaults; validate()'s messages name the flags. The bench
// itself: bench_train.cpp.
#include <cstdint>
#include <string>

#include "bench_common.hpp"

namespace tessera::bench {

struct BenchTrainOptions {
  int ranks = 2;          ///< data-parallel ranks, launched with `mpirun`
  int steps = 16;         ///< per run; the first is not timed
  int repeats = 5;        ///< runs of each tool, interleaved
  int64_t tile = 128;
  int global_batch = 4;   ///< tiles per step over all ranks: a multiple of `ranks`
  int threads = 2;        ///< cores shared by all ranks
  int64_t scene_size = 1024;
  std::string work_dir = default_work_dir();
  std::string ref_script = source_file("bench/reference/ddp_train.py");
  std::string mpirun = "mpirun";
  bool ref = true, bf16 = true;  ///< the reference's runs, Tessera's mixed-precision runs

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(BenchTrainOptions& o, V& v) {
  v.field("ranks", o.ranks, "Data-parallel ranks (launched with mpirun)");
  v.field("steps", o.steps, "Training steps (the first is not timed)");
  v.field("repeats", o.repeats, "Runs of each tool, interleaved; medians are reported");
  v.field("tile", o.tile, "Tile side");
  v.field("global_batch", o.global_batch, "Tiles per step over all ranks");
  v.field("threads", o.threads, "Cores shared by all ranks (the reference's --threads)");
  v.field("scene_size", o.scene_size, "Side of the generated training scene");
  v.field("work_dir", o.work_dir, "Where the scene and run go");
  v.field("ref_script", o.ref_script, "The PyTorch reference (its command line: bench/README.md)");
  v.field("mpirun", o.mpirun, "MPI launcher");
  v.field("ref", o.ref, "The PyTorch reference (--no-ref: skip it)");
  v.field("bf16", o.bf16, "Tessera's mixed-precision (train.precision bf16) runs (--no-bf16: skip them)");
}

/// Data-parallel training speed of `tessera train` under mpirun against PyTorch DDP, the two
/// interleaved: a table on stdout, then the report as one JSON line. Throws tessera::Error.
void run_bench_train(const BenchTrainOptions& o);

}  // namespace tessera::bench
