// tessera bench compose: flags → BenchComposeOptions → run_bench_compose (bench/bench_compose.cpp).
#include "bench_compose_options.hpp"
#include "commands.hpp"
#include "options_cli.hpp"

namespace tessera::cli {

void register_bench_compose(CLI::App& parent) {
  auto* cmd = parent.add_subcommand(
      "compose", "Per-rank memory of combined layouts (dp × pp × sp) beside each single mode's, measured and predicted");
  static bench::BenchComposeOptions options;
  add_field_flags(cmd, options);
  cmd->callback([] { bench::run_bench_compose(options); });
}

}  // namespace tessera::cli
