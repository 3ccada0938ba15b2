// tessera postprocess: flags → PostprocessOptions → run_postprocess (engine/include/tessera/engine/postprocessing.hpp).
#include "commands.hpp"
#include "options_cli.hpp"
#include "tessera/engine/postprocessing.hpp"

namespace tessera::cli {

void register_postprocess(CLI::App& app) {
  auto* cmd = app.add_subcommand("postprocess",
                                 "Decide nnU-Net's post-processing (keep each class's largest connected component or "
                                 "not) on a run's validation predictions; `tessera infer` then applies it");
  static engine::PostprocessOptions options;
  add_field_flags(cmd, options);
  cmd->get_option("--run")->required();
  cmd->get_option("--pred")->required();
  cmd->get_option("--truth")->required();
  cmd->callback([] { engine::run_postprocess(options); });
}

}  // namespace tessera::cli
