#pragma once
// `--profile FILE` of tessera train and infer: while an OperatorProfile lives, LibTorch
// records every operator this process runs (forward, backward, optimizer, the trainer's own
// tensor work); when it ends the trace is written as Chrome trace JSON (chrome://tracing,
// Perfetto), and a line on stderr says where and how to read it
// (scripts/profile_summary.py FILE: self time per operator). Slows the run; one per process.
#include <memory>
#include <string>

namespace torch::autograd::profiler {
struct RecordProfile;
}

namespace tessera::engine {

class OperatorProfile {
 public:
  /// Records when `path` is non-empty and `enabled` (rank 0 under MPI); otherwise nothing.
  OperatorProfile(const std::string& path, bool enabled);
  ~OperatorProfile();
  OperatorProfile(const OperatorProfile&) = delete;
  OperatorProfile& operator=(const OperatorProfile&) = delete;

 private:
  std::string path_;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> record_;
};

}  // namespace tessera::engine
