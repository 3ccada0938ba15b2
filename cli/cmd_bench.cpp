// tessera bench: the benchmark commands, each flags → its options struct → a driver of
// cli/bench/ (the tessera_bench library); here `bench infer` (bench/bench_infer.cpp).
#include "bench_infer_options.hpp"
#include "commands.hpp"
#include "options_cli.hpp"

namespace tessera::cli {

void register_bench(CLI::App& app) {
  auto* group = app.add_subcommand("bench", "Benchmarks with printed, reproducible figures");
  register_bench_allreduce(*group);
  register_bench_train(*group);
  register_bench_pipeline(*group);
  register_bench_spatial(*group);
  register_bench_dsn(*group);
  register_bench_compose(*group);
  register_bench_simulate(*group);
  group->require_subcommand(1);
  auto* cmd = group->add_subcommand("infer", "Inference speed and memory against the PyTorch sliding-window reference");
  static bench::BenchInferOptions options;
  add_field_flags(cmd, options);
  cmd->callback([] { bench::run_bench_infer(options); });
}

}  // namespace tessera::cli
