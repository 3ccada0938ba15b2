// tessera bench dsn: flags → BenchDsnOptions → run_bench_dsn (bench/bench_dsn.cpp). Run
// without mpirun: it launches `mpirun -np 1+N tessera bench dsn --worker-domains 1+N …` itself.
#include "bench_dsn_options.hpp"
#include "commands.hpp"
#include "options_cli.hpp"

namespace tessera::cli {

void register_bench_dsn(CLI::App& parent) {
  auto* cmd = parent.add_subcommand("dsn", "Domain-parallel DSN training: per-rank peak memory for 1 + N domains "
                                           "against one process (launches mpirun)");
  static bench::BenchDsnOptions options;
  add_field_flags(cmd, options);
  cmd->get_option("--worker-domains")->group("");  // internal: a launched worker
  cmd->callback([] { bench::run_bench_dsn(options); });
}

}  // namespace tessera::cli
