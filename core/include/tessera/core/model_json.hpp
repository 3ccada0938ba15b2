#pragma once
// UNetOptions as JSON, the one spelling shared by checkpoints, `tessera export` model.json and
// `tessera model-info --json`: {"dims", "in_channels", "classes", "levels", "convs_per_level",
// "base_filters", "kernel", "padding", "norm", "decoder"}. nlohmann's ADL hooks, so
// `j["model"] = options` and `j.at("model").get<UNetOptions>()` work.
#include <nlohmann/json_fwd.hpp>

#include "tessera/core/unet_spec.hpp"

namespace tessera {

void to_json(nlohmann::json& j, const UNetOptions& o);
/// Throws nlohmann::json::exception on a missing field, tessera::Error on a bad enum name.
void from_json(const nlohmann::json& j, UNetOptions& o);

}  // namespace tessera
