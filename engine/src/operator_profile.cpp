#include "tessera/engine/operator_profile.hpp"

#include <cstdio>
#include <fstream>

#include <torch/csrc/autograd/profiler_legacy.h>

#include "tessera/core/error.hpp"

namespace tessera::engine {

OperatorProfile::OperatorProfile(const std::string& path, bool enabled) : path_(path) {
  if (path.empty() || !enabled) return;
  if (!std::ofstream(path)) throw Error(path + ": cannot write the operator profile here");
  record_ = std::make_unique<torch::autograd::profiler::RecordProfile>(path);
}

OperatorProfile::~OperatorProfile() {
  if (!record_) return;
  record_.reset();  // writes the trace
  std::fprintf(stderr, "profile: operator trace in %s (scripts/profile_summary.py %s; chrome://tracing)\n",
               path_.c_str(), path_.c_str());
}

}  // namespace tessera::engine
