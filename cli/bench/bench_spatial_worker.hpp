#pragma once
// The worker `tessera bench spatial` launches (bench_spatial_worker.cpp) and the planner's
// figure both compare; internal to the bench.
#include <cstdint>
#include <vector>

#include "bench_spatial_options.hpp"

namespace tessera::bench {

/// The planner's per-rank peak (baseline excluded) for a tile of side `side` split into
/// `parts` blocks per axis: one rank runs the network without decomposition, so its model is
/// the plain layer model.
int64_t predicted_peak(const UNetOptions& o, int64_t side, const std::vector<int>& parts, int batch);

/// One layout on this process's world (`o.worker`: measure, or cap with memory_cap), the mesh
/// `o.worker_mesh`; rank 0 prints its JSON line. Collective; throws tessera::Error.
void run_spatial_worker(const BenchSpatialOptions& o);

}  // namespace tessera::bench
