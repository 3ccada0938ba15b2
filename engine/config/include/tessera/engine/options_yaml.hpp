#pragma once
// The YAML side of the options binding (tessera/core/options_binding.hpp): reading a config
// section into an options struct through ConfigSection (so every declared key is known to
// reject_unknown_keys, with file:line errors and the closest key), and writing every declared
// field back, defaults included, for the resolved RUN/config.yaml. Torch-free.
#include <string>
#include <type_traits>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "tessera/engine/config_file.hpp"
#include "tessera/core/options_binding.hpp"

namespace tessera::engine {

/// Reads the fields of an options struct present in one config section; absent keys keep
/// the struct's value (its default). A list given in the file replaces the default list.
class YamlFieldReader {
 public:
  explicit YamlFieldReader(ConfigSection section) : section_(std::move(section)) {}

  template <class M>
  void field(const char* key, M& m, const char*) {
    if constexpr (std::is_enum_v<M>) {
      section_.read_as(key, m, [](const std::string& text) {
        M v{};
        parse_value(text, v);
        return v;
      });
    } else {
      section_.read(key, m);
    }
  }
  template <class S>
  void section(const char* key, S& s, const char*) {
    YamlFieldReader sub(section_.section(key));
    fields(s, sub);
  }
  template <class S>
  void list(const char* key, std::vector<S>& items, const char*) {
    if (!section_.has(key)) {
      section_.list(key);  // registers the entries' schema, so their keys are checked
      return;
    }
    items.clear();
    for (const ConfigSection& entry : section_.list(key)) {
      S item;
      YamlFieldReader r(entry);
      fields(item, r);
      items.push_back(std::move(item));
    }
  }

 private:
  ConfigSection section_;
};

/// Reads `o`'s declared fields from `section`.
template <class O>
void read_fields(const ConfigSection& section, O& o) {
  YamlFieldReader r(section);
  fields(o, r);
}

/// Writes every declared field into a YAML mapping. Lists of plain values are written in
/// flow style (`class_names: [a, b]`), as the examples spell them.
class YamlFieldWriter {
 public:
  explicit YamlFieldWriter(YAML::Node node) : node_(std::move(node)) {}

  template <class M>
  void field(const char* key, M& m, const char*) {
    if constexpr (std::is_enum_v<M>) {
      node_[key] = value_name(m);
    } else {
      YAML::Node v(m);
      if (v.IsSequence()) v.SetStyle(YAML::EmitterStyle::Flow);
      node_[key] = v;
    }
  }
  template <class S>
  void section(const char* key, S& s, const char*) {
    YamlFieldWriter sub(node_[key]);
    fields(s, sub);
  }
  template <class S>
  void list(const char* key, std::vector<S>& items, const char*) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (S item : items) {
      YAML::Node e(YAML::NodeType::Map);
      YamlFieldWriter w(e);
      fields(item, w);
      out.push_back(e);
    }
    node_[key] = out;
  }

 private:
  YAML::Node node_;
};

/// `o`'s declared fields as a YAML mapping (every field, defaults included).
template <class O>
YAML::Node to_yaml(O o) {
  YAML::Node node(YAML::NodeType::Map);
  YamlFieldWriter w(node);
  fields(o, w);
  return node;
}

}  // namespace tessera::engine
