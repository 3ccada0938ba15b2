#pragma once
// What `tessera bench infer` is asked, declared once: fields() drives the command's flags
// (each key is its flag, `small_size` → --small-size; a bool that defaults to true is turned
// off by --no-<key>: --no-ref), their help and shown defaults; validate()'s messages name the
// flags. The bench itself: bench_infer.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"

namespace tessera::bench {

struct BenchInferOptions {
  int64_t size = 4096;        ///< scene side of the speed comparison
  int64_t tile = 384;         ///< Tessera's inset side, the reference's roi, the bench model's training tile
  int64_t small_size = 2048;  ///< scene side of the unet-small run
  std::string small_tile = "auto";  ///< what a user gets: the largest tile within the memory budget
  int runs = 5;               ///< interleaved runs of each tool (median and spread printed)
  /// W×H scenes of the memory rows (a non-square one repeats the square scene: bench_scene)
  std::vector<std::string> memory_scenes{"2048x2048", "8192x8192", "2048x32768"};
  int64_t volume = 0;         ///< > 0: a volume³ CT, `volume_model` streamed against --tile auto
  std::string volume_model = "unet3d-32";
  int threads = 0;       ///< 0: all cores
  std::string work_dir = default_work_dir();
  int train_steps = 20;  ///< of the checkpoint both tools run (at `tile`)
  std::string ref_script = source_file("bench/reference/sliding_window.py");
  bool speed = true, ref = true, small = true, memory = true, bf16 = true, stream = true;  ///< the parts of the bench that run

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(BenchInferOptions& o, V& v) {
  v.field("size", o.size, "Scene side for the speed comparison");
  v.field("tile", o.tile, "Tessera's inset side");
  v.field("small_size", o.small_size, "Scene side for the unet-small peak-fraction run");
  v.field("small_tile", o.small_tile, "Tile for the unet-small run (auto: the largest within the memory budget)");
  v.field("runs", o.runs, "Interleaved runs of each tool (tessera, reference, tessera, ...): median and min-max");
  v.field("memory_scenes", o.memory_scenes, "Scenes W×H for peak memory against the stream's prediction");
  v.field("volume", o.volume, "Side of a CT volume streamed against --tile auto (0: skip; e.g. 256)");
  v.field("volume_model", o.volume_model, "3-D preset of the --volume rows");
  v.field("threads", o.threads, "Threads for both tools (0: all cores)");
  v.field("work_dir", o.work_dir, "Where generated scenes are kept");
  v.field("train_steps", o.train_steps, "Training steps of the model both tools run (at --tile)");
  v.field("ref_script", o.ref_script, "The PyTorch reference (its command line: bench/README.md)");
  v.field("speed", o.speed, "The speed comparison on --size (--no-speed: skip it, and the reference with it)");
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

/// The parts of bench infer in bench_infer_scenes.cpp, each printing its rows and adding to
/// `report`: peak memory per --memory-scenes scene (tiles, and the stream beside its predicted
/// footprint), and the --volume rows (streamed against --tile auto).
void memory_rows(const BenchInferOptions& o, int threads, nlohmann::json& report);
void volume_rows(const BenchInferOptions& o, int threads, nlohmann::json& report);

}  // namespace tessera::bench
