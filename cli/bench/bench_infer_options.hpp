#pragma once
// What `tessera bench infer` is asked, declared once: fields() drives the command's flags
// (each key is its flag, `small_size` → --small-size; a bool that defaults to true is turned
// off by --no-<key>: --no-ref), their help and shown defaults; validate()'s messages name the
// flags. The bench itself: bench_infer.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace tessera::bench {

struct BenchInferOptions {
  int64_t size = 4096;        ///< scene side of the speed comparison
  int64_t tile = 384;         ///< Tessera's inset side, the reference's roi, the bench model's training tile
  int64_t small_size = 2048;  ///< scene side of the unet-small run
  std::string small_tile = "auto";  ///< what a user gets: the largest tile within the memory budget
  std::vector<int64_t> memory_sizes{2048, 8192};
  int threads = 0;       ///< 0: all cores
  std::string work_dir = default_work_dir();
  int train_steps = 20;  ///< of the checkpoint both tools run (at `tile`)
  std::string ref_script = source_file("bench/reference/sliding_window.py");
  bool ref = true, small = true, memory = true, bf16 = true, stream = true;  ///< the parts of the bench that run

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(BenchInferOptions& o, V& v) {
  v.field("size", o.size, "Scene side for the speed comparison");
  v.field("tile", o.tile, "Tessera's inset side");
  v.field("small_size", o.small_size, "Scene side for the unet-small peak-fraction run");
  v.field("small_tile", o.small_tile, "Tile for the unet-small run (auto: the largest within the memory budget)");
  v.field("memory_sizes", o.memory_sizes, "Scene sides for the memory check");
  v.field("threads", o.threads, "Threads for both tools (0: all cores)");
  v.field("work_dir", o.work_dir, "Where generated scenes are kept");
  v.field("train_steps", o.train_steps, "Training steps of the model both tools run (at --tile)");
  v.field("ref_script", o.ref_script, "The PyTorch reference (its command line: bench/README.md)");
  v.field("ref", o.ref, "The PyTorch reference (--no-ref: skip it)");
  v.field("small", o.small, "The unet-small run (--no-small: skip it)");
  v.field("memory", o.memory, "The memory-vs-size runs (--no-memory: skip them)");
  v.field("bf16", o.bf16, "The bfloat16 row (--no-bf16: skip it)");
  v.field("stream", o.stream, "The --mode stream rows (--no-stream: skip them)");
}

/// Tessera's streaming tiled inference against the PyTorch sliding-window reference, the
/// machine's convolution peak and peak memory against scene size: a table on stdout, then
/// the report as one JSON line. Throws tessera::Error.
void run_bench_infer(const BenchInferOptions& o);

}  // namespace tessera::bench
