#pragma once
// The model flags shared by model-info, infer, plan and bench: a preset plus overrides, one
// flag per UNetOptions field named after its key (options_binding.hpp): --dims,
// --in-channels, --classes, --levels, --convs-per-level (also --convs), --base-filters (also
// --filters), --kernel, --padding, --norm, --decoder.
#include <map>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "options_cli.hpp"
#include "tessera/core/unet_spec.hpp"

namespace tessera::cli {

struct ModelFlags {
  std::string preset = "unet-tiny";
  FlagOverrides<UNetOptions> overrides;

  void add_to(CLI::App* cmd);
  /// The preset with every given override applied, not validated (a seed U-Net of one class
  /// is valid where the built-in family is not).
  UNetOptions with_overrides() const;
  /// The preset with every given override applied, validated.
  UNetOptions resolve() const;
  /// The text of every override flag given, by UNetOptions key ("base_filters" → "8").
  const std::map<std::string, std::string>& given_overrides() const { return overrides.given_all(); }
  /// The text of the flag for a UNetOptions key ("base_filters"), when given.
  std::optional<std::string> given(const std::string& key) const { return overrides.given(key); }
};

}  // namespace tessera::cli
