// tessera bench pipeline: flags → BenchPipelineOptions → run_bench_pipeline
// (bench/bench_pipeline.cpp); the network from --model and the model flags. Run under mpirun:
//   mpirun -np 4 tessera bench pipeline --model unet-tiny --tile 64 --batch 8 --micro 1,2,4,8
#include "bench_pipeline_options.hpp"
#include "commands.hpp"
#include "model_options.hpp"
#include "options_cli.hpp"

namespace tessera::cli {

void register_bench_pipeline(CLI::App& parent) {
  auto* cmd = parent.add_subcommand("pipeline", "Pipeline-parallel step time, bubble and stage memory (under mpirun)");
  static bench::BenchPipelineOptions options;
  static ModelFlags model;
  model.add_to(cmd);
  add_field_flags(cmd, options);
  cmd->callback([] {
    options.model = model.resolve();
    options.model_preset = model.preset;
    bench::run_bench_pipeline(options);
  });
}

}  // namespace tessera::cli
