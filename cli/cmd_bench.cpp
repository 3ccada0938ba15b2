// tessera bench: measured figures (filled in by the benchmark commit).
#include "commands.hpp"

namespace tessera::cli {
void register_bench(CLI::App& app) {
  app.add_subcommand("bench", "Benchmarks: infer (speed and memory against the PyTorch reference)");
}
}  // namespace tessera::cli
