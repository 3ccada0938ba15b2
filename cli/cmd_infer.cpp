// tessera infer: flags → InferOptions → InferJob (engine/include/tessera/engine/infer_job.hpp).
#include "commands.hpp"
#include "model_options.hpp"
#include "options_cli.hpp"
#include "tessera/engine/infer_job.hpp"
#include "tessera/parallel/comm/runtime.hpp"

namespace tessera::cli {

void register_infer(CLI::App& app) {
  auto* cmd = app.add_subcommand("infer", "Tiled inference: image (or folder) -> label raster / label volume");
  cmd->footer(
      "A folder of images is a batch of scenes: under mpirun with at least as many scenes as ranks, each rank "
      "takes whole scenes, largest first; a rerun keeps the finished scenes (labels + STAC item) and computes "
      "the rest. Every georeferenced label raster gets a STAC item <output minus .tif>.stac.json; a folder "
      "also gets collection.json.\n"
      "Examples:\n"
      "  tessera infer --checkpoint model.pt --input scene.tif --output labels.cog.tif --probabilities probs.tif\n"
      "  mpirun -np 4 tessera infer --checkpoint model.pt --input scenes/ --output labels/ --mosaic labels/all.vrt "
      "--t-srs EPSG:3857");
  static engine::InferOptions options;
  static ModelFlags model;
  add_field_flags(cmd, options);
  model.add_to(cmd);
  cmd->get_option("--input")->required();
  cmd->get_option("--output")->required();
  cmd->get_option("--precision")->check(CLI::IsMember({"fp32", "bf16"}));
  cmd->callback([] {
    if (options.init == "random") {  // the model flags describe init random's network
      options.model = model.resolve();
      options.model_preset = model.preset;
    }
    engine::InferJob(options).run(parallel::world());
  });
}

}  // namespace tessera::cli
