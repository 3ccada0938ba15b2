#pragma once
// Shared by the `tessera bench …` subcommands.
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace tessera::cli {

/// A deterministic 4-band scene of side n (tessera-make-sample), generated once into
/// work_dir/scene-n/ and reused; returns the GeoTIFF's path.
std::string bench_scene(const std::string& work_dir, int64_t n);

/// `bench train`, attached to the `bench` subcommand.
void register_bench_train(CLI::App& bench);

}  // namespace tessera::cli
