// tessera model-info --model PRESET [overrides] [--json]: size, halo and cost of a network.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "model_options.hpp"

namespace tessera::cli {

void register_model_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("model-info", "Parameters, layers, halo, receptive field and FLOPs of a U-Net");
  static ModelFlags flags;
  static bool json = false;
  flags.add_to(cmd);
  cmd->add_flag("--json", json, "Print JSON");
  cmd->callback([] {
    const UNetOptions o = flags.resolve();
    nlohmann::json j{{"model", flags.preset},
                     {"dims", o.dims},
                     {"levels", o.levels},
                     {"convs_per_level", o.convs_per_level},
                     {"base_filters", o.base_filters},
                     {"kernel", o.kernel},
                     {"padding", to_string(o.padding)},
                     {"norm", to_string(o.norm)},
                     {"decoder", to_string(o.decoder)},
                     {"in_channels", o.in_channels},
                     {"classes", o.classes},
                     {"params", unet_parameter_count(o)},
                     {"layers", unet_layer_count(o)},
                     {"halo", unet_halo(o)},
                     {"remainder", unet_remainder(o)},
                     {"alignment", unet_alignment(o)},
                     {"receptive_field", unet_receptive_field(o)},
                     {"flops_per_output_pixel", unet_flops_per_output_pixel(o)}};
    if (json) {
      std::cout << j.dump(2) << '\n';
      return;
    }
    std::printf("%s: %d-D U-Net, L=%d, n_c=%d, f=%d, %s padding, %s norm, %s decoder\n", flags.preset.c_str(), o.dims,
                o.levels, o.convs_per_level, o.base_filters, to_string(o.padding).c_str(), to_string(o.norm).c_str(),
                to_string(o.decoder).c_str());
    std::printf("  parameters              %lld (%.1f MiB as float32)\n", (long long)unet_parameter_count(o),
                unet_parameter_count(o) * 4.0 / (1 << 20));
    std::printf("  layers                  %d\n", unet_layer_count(o));
    std::printf("  halo eps                %lld px per side\n", (long long)unet_halo(o));
    std::printf("  valid output sizes      S + %lld, S a multiple of %lld\n", (long long)unet_remainder(o),
                (long long)unet_alignment(o));
    std::printf("  receptive field         %lld px\n", (long long)unet_receptive_field(o));
    std::printf("  FLOPs per output pixel  %.3g (forward)\n", unet_flops_per_output_pixel(o));
  });
}

}  // namespace tessera::cli
