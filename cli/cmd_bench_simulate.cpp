// tessera bench simulate: flags → BenchSimulateOptions → run_bench_simulate
// (bench/bench_simulate.cpp).
//   tessera bench simulate [--model unet-tiny] [--tile 48] [--batch 8] [--micro 1,2,4,8]
#include "bench_simulate_options.hpp"
#include "commands.hpp"
#include "options_cli.hpp"

namespace tessera::cli {

void register_bench_simulate(CLI::App& parent) {
  auto* cmd = parent.add_subcommand(
      "simulate", "The cluster simulator's step times against this machine: bench pipeline and mpirun train, 2 ranks");
  static bench::BenchSimulateOptions options;
  add_field_flags(cmd, options);
  cmd->callback([] { bench::run_bench_simulate(options); });
}

}  // namespace tessera::cli
