// tessera bench spatial: flags → BenchSpatialOptions → run_bench_spatial
// (bench/bench_spatial.cpp); the network from --model (default unet-small) and the model
// flags. Run without mpirun: it launches `mpirun -np P tessera bench spatial --worker …` itself.
#include "bench_spatial_options.hpp"
#include "commands.hpp"
#include "model_options.hpp"
#include "options_cli.hpp"

namespace tessera::cli {

void register_bench_spatial(CLI::App& parent) {
  auto* cmd = parent.add_subcommand("spatial", "Spatial parallelism: per-rank memory, step time, halo bytes against "
                                               "the planner, largest side under a memory cap (launches mpirun)");
  static bench::BenchSpatialOptions options;
  static ModelFlags model;
  model.preset = options.model_preset;
  model.add_to(cmd);
  add_field_flags(cmd, options);
  for (const char* internal : {"--worker", "--worker-mesh"}) cmd->get_option(internal)->group("");
  cmd->callback([] {
    options.model = bench::spatial_bench_model(model);
    options.model_preset = model.preset;
    bench::run_bench_spatial(options);
  });
}

}  // namespace tessera::cli
