// tessera bench allreduce: flags → BenchAllreduceOptions → run_bench_allreduce
// (bench/bench_allreduce.cpp). Run under mpirun:
//   mpirun -np 4 tessera bench allreduce
#include "bench_allreduce_options.hpp"
#include "commands.hpp"
#include "options_cli.hpp"

namespace tessera::cli {

void register_bench_allreduce(CLI::App& parent) {
  auto* cmd = parent.add_subcommand("allreduce", "Allreduce bus bandwidth over all ranks, 4 KiB to 64 MiB");
  static bench::BenchAllreduceOptions options;
  add_field_flags(cmd, options);
  cmd->callback([] { bench::run_bench_allreduce(options); });
}

}  // namespace tessera::cli
