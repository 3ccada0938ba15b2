// tessera model-info: flags → ModelInfoOptions → print_model_info (engine/include/tessera/engine/model_info.hpp).
#include "commands.hpp"
#include "model_options.hpp"
#include "options_cli.hpp"
#include "tessera/engine/model_info.hpp"

namespace tessera::cli {

void register_model_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("model-info", "Parameters, layers, halo, receptive field and FLOPs of a U-Net");
  cmd->footer(
      "Examples:\n"
      "  tessera model-info --model unet-small [--json]   # params, layers, halo, receptive field, FLOPs/pixel\n"
      "  tessera model-info --checkpoint runs/se/checkpoints/last.pt   # the model, normalisation, resampling\n"
      "  tessera model-info --config sample_data/scene_dsn.yaml   # a DSN's parts\n"
      "  tessera model-info --list   # architectures, losses, post-processors: built-in and plugins");
  static engine::ModelInfoOptions options;
  static ModelFlags model;
  model.add_to(cmd);
  add_field_flags(cmd, options);
  cmd->callback([] {
    // A U-Net preset is resolved by the engine, a plugin's model built from the same texts.
    options.model_preset = model.preset;
    options.model_overrides = model.given_overrides();
    engine::print_model_info(options);
  });
}

}  // namespace tessera::cli
