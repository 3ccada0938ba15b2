#include "model_options.hpp"

namespace tessera::cli {

void ModelFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--model", preset, "Preset: unet-tiny, unet-small, unet-medium1, unet-medium2, unet-large, "
                                     "unet3d-tiny, unet3d-32, unet3d-64, unet3d-128")
      ->capture_default_str();
  cmd->add_option("--levels", levels, "Override L, the number of levels");
  cmd->add_option("--convs", convs, "Override n_c, convolutions per level");
  cmd->add_option("--filters", filters, "Override f, the base filters (doubling per level)");
  cmd->add_option("--classes", classes, "Number of output classes");
  cmd->add_option("--in-channels", in_channels, "Input channels (bands)");
  cmd->add_option("--dims", dims, "2 or 3 spatial dimensions");
  cmd->add_option("--padding", padding, "valid (exact tiling) or same");
  cmd->add_option("--norm", norm, "none, batch, group or instance");
  cmd->add_option("--decoder", decoder, "transposed or upsample");
}

UNetOptions ModelFlags::resolve() const {
  UNetOptions o = unet_preset(preset);
  if (levels) o.levels = *levels;
  if (convs) o.convs_per_level = *convs;
  if (filters) o.base_filters = *filters;
  if (classes) o.classes = *classes;
  if (in_channels) o.in_channels = *in_channels;
  if (dims) o.dims = *dims;
  if (padding) o.padding = parse_padding(*padding);
  if (norm) o.norm = parse_norm(*norm);
  if (decoder) o.decoder = parse_decoder(*decoder);
  o.validate();
  return o;
}

}  // namespace tessera::cli
