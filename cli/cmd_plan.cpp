// tessera plan: flags → PlanJobOptions → run_plan (engine/include/tessera/engine/plan_job.hpp).
#include "commands.hpp"
#include "model_options.hpp"
#include "options_cli.hpp"
#include "tessera/engine/plan_job.hpp"

namespace tessera::cli {

void register_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Choose tiling, pipeline stages, micro-batches and data parallelism for a "
                                         "model, an image and a set of devices");
  cmd->footer(
      "With --calibrate: times forward + backward of --model on this machine and measures every layer's memory "
      "beyond the stage model at two tile insets; later plans and `tessera bench pipeline` use them.\n"
      "Examples:\n"
      "  tessera plan --model unet-small --image 10000x10000 --devices 1200 --device-memory 16 --train\n"
      "  tessera plan --model unet-tiny --image 3000x3000 --devices 2 --simulate clusters/this-machine.yaml\n"
      "  tessera plan --calibrate --model unet-small --threads 1");
  static engine::PlanJobOptions options;
  static ModelFlags model;
  model.add_to(cmd);
  add_field_flags(cmd, options);
  cmd->callback([] {
    options.model = model.resolve();
    options.model_preset = model.preset;
    engine::run_plan(options);
  });
}

}  // namespace tessera::cli
