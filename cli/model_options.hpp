#pragma once
// The model flags shared by model-info, infer and bench: a preset plus overrides.
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "tessera/core/unet_spec.hpp"

namespace tessera::cli {

struct ModelFlags {
  std::string preset = "unet-tiny";
  std::optional<int> levels, convs, filters, classes, in_channels, dims;
  std::optional<std::string> padding, norm, decoder;

  void add_to(CLI::App* cmd);
  /// The preset with every given override applied, validated.
  UNetOptions resolve() const;
};

}  // namespace tessera::cli
