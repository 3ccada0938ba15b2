// tessera eval: flags → EvalOptions → run_eval (engine/include/tessera/engine/evaluation.hpp).
#include "commands.hpp"
#include "options_cli.hpp"
#include "tessera/engine/evaluation.hpp"

namespace tessera::cli {

void register_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval",
                                 "Per-class Dice, IoU, precision, recall (and with --hd95 the 95th-percentile "
                                 "Hausdorff distance) of a label map against the truth");
  static engine::EvalOptions options;
  add_field_flags(cmd, options);
  cmd->get_option("--pred")->required();
  cmd->get_option("--truth")->required();
  cmd->get_option("--names")->delimiter(',');  // --names a,b,c
  cmd->callback([] { engine::run_eval(options); });
}

}  // namespace tessera::cli
