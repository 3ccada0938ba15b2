// tessera info: flags → ImageInfoOptions → print_image_info (engine/include/tessera/engine/image_info.hpp).
#include "commands.hpp"
#include "options_cli.hpp"
#include "tessera/engine/image_info.hpp"

namespace tessera::cli {

void register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Describe a raster or volume: size, bands, type, CRS or spacing");
  static engine::ImageInfoOptions options;
  add_field_flags(cmd, options);
  // The path is the command's argument (`tessera info FILE`), with the help its field declares.
  cmd->add_option("path", options.path, cmd->get_option("--path")->get_description());
  cmd->callback([] { engine::print_image_info(options); });
}

}  // namespace tessera::cli
