#pragma once
// What `tessera bench allreduce` is asked, declared once: fields() drives the command's
// flags (`min_bytes` → --min-bytes), their help and shown defaults; validate()'s messages name
// the flags. The bench itself: bench_allreduce.cpp.
#include <cstdint>
#include <string>

namespace tessera::bench {

struct BenchAllreduceOptions {
  std::string backend = "mpi";  ///< mpi, or nccl (CUDA builds, GPU ranks)
  int64_t min_bytes = 4 << 10;  ///< smallest message; sizes double up to max_bytes
  int64_t max_bytes = 64 << 20;
  double seconds = 0.3;         ///< time spent per message size

  /// Throws tessera::Error naming the flag.
  void validate() const;
};

template <class V>
void fields(BenchAllreduceOptions& o, V& v) {
  v.field("backend", o.backend, "mpi, or nccl (CUDA builds, GPU ranks)");
  v.field("min_bytes", o.min_bytes, "Smallest message");
  v.field("max_bytes", o.max_bytes, "Largest message");
  v.field("seconds", o.seconds, "Time spent per message size");
}

/// Allreduce bandwidth over all ranks (run under mpirun): rank 0 prints a row per message
/// size. Collective; throws tessera::Error.
void run_bench_allreduce(const BenchAllreduceOptions& o);

}  // namespace tessera::bench
