#pragma once
// The worker `tessera bench dsn` launches (bench_dsn_worker.cpp); internal to the bench.
#include <string>

#include <nlohmann/json.hpp>

#include "bench_dsn_options.hpp"
#include "tessera/core/unet_spec.hpp"

namespace tessera::bench {

/// The bench's network: `preset` with `same` padding, group norm, 4 bands and 4 classes.
UNetOptions dsn_bench_model(const std::string& preset);

/// One DSN training of `o.worker_domains` domains on this process's world (one domain per
/// rank, or every domain in one process): {domains, ranks, peak_bytes and parameters per
/// rank, step_seconds}, on every rank. Collective; throws tessera::Error.
nlohmann::json run_dsn_worker(const BenchDsnOptions& o);

}  // namespace tessera::bench
