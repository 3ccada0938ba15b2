// tessera simulate: flags → SimulateOptions → run_simulate (engine/include/tessera/engine/simulate_job.hpp).
#include "commands.hpp"
#include "model_options.hpp"
#include "options_cli.hpp"
#include "tessera/engine/simulate_job.hpp"

namespace tessera::cli {

void register_simulate(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("simulate", "Simulate one pass of a layout on a described cluster (clusters/*.yaml)");
  cmd->footer(
      "--seed-tables prints the seed paper's pipeline experiments as predictions: on one node, the speed-up of 1 … 6 "
      "pipeline stages at a 1434² tile with 2 micro-batches per stage, and the 6-stage speed-up at tile sides 192, "
      "512 and 1024.\n"
      "Examples:\n"
      "  tessera simulate --cluster clusters/summit.yaml --model s0-small --image 10000x10000 --tiles 6400 --nodes 200 "
      "--dp 1200 --input-side 1434\n"
      "  tessera simulate --cluster clusters/summit.yaml --model s0-small --seed-tables");
  static engine::SimulateOptions options;
  static ModelFlags model;
  model.add_to(cmd);
  add_field_flags(cmd, options);
  cmd->callback([] {
    options.model = model.with_overrides();  // validated by the engine (a seed U-Net has one class)
    options.model_preset = model.preset;
    engine::run_simulate(options);
  });
}

}  // namespace tessera::cli
