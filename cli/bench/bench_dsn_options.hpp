#pragma once
// What `tessera bench dsn` is asked, declared once: fields() drives the command's flags, their
// help and shown defaults; validate()'s messages name the flags. `worker_domains` is the
// flag the bench passes to the workers it launches (hidden from --help). The bench itself:
// bench_dsn.cpp (the driver) and bench_dsn_worker.cpp (one training).
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::bench {

struct BenchDsnOptions {
  std::string model = "unet-tiny";  ///< U-Net preset, run with same padding, group norm, 4 bands, 4 classes
  int64_t side = 128;               ///< training tile side
  int batch = 2;                    ///< tiles per domain and step
  int steps = 3;
  std::vector<int> targets{1, 3, 7};  ///< target-domain counts N: a row of 1 + N ranks each
  std::string similarity = "dann";
  int threads = 1;  ///< per rank
  bool channels_last = true;  ///< train.channels_last of every run (--no-channels-last: contiguous)
  std::string mpirun = "mpirun";
  bool json = false;       ///< also the report as one JSON line
  int worker_domains = 0;  ///< internal: > 0 in a launched worker, the domains it trains

  /// Throws tessera::Error naming the flag.
  void validate() const;
};

template <class V>
void fields(BenchDsnOptions& o, V& v) {
  v.field("model", o.model, "U-Net preset (with same padding, group norm, 4 bands, 4 classes)");
  v.field("side", o.side, "Training tile side");
  v.field("batch", o.batch, "Tiles per domain and step");
  v.field("steps", o.steps, "DSN training steps per run");
  v.field("targets", o.targets, "Target-domain counts N (1 + N ranks each)");
  v.field("similarity", o.similarity, "dann or mmd");
  v.field("threads", o.threads, "LibTorch threads per rank");
  v.field("channels_last", o.channels_last,
          "Channels-last weights and activations, as train.channels_last (--no-channels-last: contiguous)");
  v.field("mpirun", o.mpirun, "MPI launcher");
  v.field("json", o.json, "Also print the report as one JSON line");
  v.field("worker_domains", o.worker_domains, "Internal: the domains of a launched worker");
}

/// Without worker_domains: for every N of `targets`, the per-rank peak memory of
/// domain-parallel DSN training for 1 + N domains (mpirun -np 1+N) beside one process, a table
/// on stdout. With it: one such training (a launched worker), its JSON line from rank 0.
/// Throws tessera::Error.
void run_bench_dsn(const BenchDsnOptions& o);

}  // namespace tessera::bench
