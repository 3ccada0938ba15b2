// tessera bench train: flags → BenchTrainOptions → run_bench_train (bench/bench_train.cpp).
#include "bench_train_options.hpp"
#include "commands.hpp"
#include "options_cli.hpp"

namespace tessera::cli {

void register_bench_train(CLI::App& parent) {
  auto* cmd =
      parent.add_subcommand("train", "Data-parallel training speed against PyTorch DDP (bench/reference/ddp_train.py)");
  static bench::BenchTrainOptions options;
  add_field_flags(cmd, options);
  cmd->callback([] { bench::run_bench_train(options); });
}

}  // namespace tessera::cli
