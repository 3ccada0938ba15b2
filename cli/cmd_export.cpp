// tessera export / import: flags → ExportOptions / ImportOptions → export_weights / import_weights
// (engine/include/tessera/engine/weights_exchange.hpp): weights exchange with Python (PyTorch).
#include "commands.hpp"
#include "options_cli.hpp"
#include "tessera/engine/weights_exchange.hpp"

namespace tessera::cli {

void register_export(CLI::App& app) {
  auto* ex = app.add_subcommand("export", "Write a checkpoint's weights for Python: model.pt (torch.load) + model.json");
  ex->footer(
      "--example-input IN.pt --example-output OUT.pt also runs the network (eval mode) on a seeded random input and "
      "saves input and logits, so that a Python port can be checked on the same numbers.\n"
      "Example:\n"
      "  tessera export --checkpoint RUN/checkpoints/last.pt --out model.pt   # also writes model.json");
  static engine::ExportOptions export_options;
  add_field_flags(ex, export_options);
  ex->get_option("--checkpoint")->required();
  ex->get_option("--out")->required();
  ex->callback([] { engine::export_weights(export_options); });

  auto* im = app.add_subcommand("import", "Make a Tessera checkpoint from weights saved by Python (torch.save)");
  im->footer("Example:\n  tessera import --weights tuned.pt --arch model.json --out tuned.ckpt");
  static engine::ImportOptions import_options;
  add_field_flags(im, import_options);
  im->get_option("--weights")->required();
  im->get_option("--out")->required();
  im->callback([] { engine::import_weights(import_options); });
}

}  // namespace tessera::cli
