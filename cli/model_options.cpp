#include "model_options.hpp"

#include "tessera/core/model_registry.hpp"

namespace tessera::cli {

void ModelFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--model", preset, "Preset or registered model: unet-tiny, unet-small, unet-medium1, unet-medium2, "
                                     "unet-large, unet3d-tiny, unet3d-32, unet3d-64, unet3d-128, or a plugin's "
                                     "(se-unet; tessera model-info --list)")
      ->capture_default_str();
  std::vector<FlagOverrides<UNetOptions>::Flag> flags;
  for (const std::string& key : field_keys(UNetOptions{}))
    flags.push_back({key, key == "convs_per_level" ? "--convs" : key == "base_filters" ? "--filters" : ""});
  overrides.add_to(cmd, flags);
}

UNetOptions ModelFlags::with_overrides() const {
  UNetOptions o = model_preset(preset);
  overrides.apply(o);
  return o;
}

UNetOptions ModelFlags::resolve() const {
  UNetOptions o = with_overrides();
  o.validate();
  return o;
}

}  // namespace tessera::cli
