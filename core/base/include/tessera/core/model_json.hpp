#pragma once
// UNetOptions as JSON, the one spelling shared by checkpoints, `tessera export` model.json and
// `tessera model-info --json`: the keys of fields(UNetOptions&) (options_binding.hpp), the
// same as the YAML `model:` keys — {"dims", "in_channels", "classes", "levels",
// "convs_per_level", "base_filters", "kernel", "padding", "norm", "decoder"}. nlohmann's ADL
// hooks, so `j["model"] = options` and `j.at("model").get<UNetOptions>()` work.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tessera/core/options_binding.hpp"

namespace tessera {

void to_json(nlohmann::json& j, const UNetOptions& o);
/// Throws nlohmann::json::exception on a missing field, tessera::Error on a bad enum name.
void from_json(const nlohmann::json& j, UNetOptions& o);

// The bodies of to_json / from_json, driven by the field declaration. Templates over the
// JSON type so this header needs only json_fwd; instantiate where nlohmann/json.hpp is
// included. Every declared field is written and required on reading, except a model's "name",
// which checkpoints written before it existed lack (they hold the built-in "unet").
namespace options_detail {

template <class Json>
struct JsonWriter {
  Json& j;
  template <class M>
  void field(const char* key, M& m, const char*) {
    if constexpr (std::is_enum_v<M>)
      j[key] = value_name(m);
    else
      j[key] = m;
  }
  template <class S>
  void section(const char* key, S& s, const char*) {
    JsonWriter<Json> sub{j[key]};
    fields(s, sub);
  }
  template <class S>
  void list(const char* key, std::vector<S>& items, const char*) {
    Json& out = j[key] = Json::array();
    for (S item : items) {
      Json e = Json::object();
      JsonWriter<Json> w{e};
      fields(item, w);
      out.push_back(std::move(e));
    }
  }
};

template <class Json>
struct JsonReader {
  const Json& j;
  template <class M>
  void field(const char* key, M& m, const char*) {
    if (std::string_view(key) == "name" && !j.contains(key)) return;  // written before model names existed: "unet"
    if constexpr (std::is_enum_v<M>)
      parse_value(j.at(key).template get<std::string>(), m);
    else
      m = j.at(key).template get<M>();
  }
  template <class S>
  void section(const char* key, S& s, const char*) {
    JsonReader<Json> sub{j.at(key)};
    fields(s, sub);
  }
  template <class S>
  void list(const char* key, std::vector<S>& items, const char*) {
    items.clear();
    for (const Json& e : j.at(key)) {
      S item;
      JsonReader<Json> r{e};
      fields(item, r);
      items.push_back(std::move(item));
    }
  }
};

}  // namespace options_detail

/// Writes every field of `o` into the JSON object `j` (replacing it).
template <class Json, class O>
void options_to_json(Json& j, O o) {
  j = Json::object();
  options_detail::JsonWriter<Json> w{j};
  fields(o, w);
}

/// Reads every field of `o` from `j`; throws (nlohmann) on a missing one.
template <class Json, class O>
void options_from_json(const Json& j, O& o) {
  options_detail::JsonReader<Json> r{j};
  fields(o, r);
}

}  // namespace tessera
