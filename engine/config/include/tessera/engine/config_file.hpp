#pragma once
// A YAML config file that knows which keys its reader asked for.
//
// The reader (`tessera train`) asks for every key it understands through a ConfigSection;
// each ask registers the key as known for that section, whether or not the document has it.
// reject_unknown_keys() then walks the document and refuses the first key nobody asked for,
// naming the file, the line and the closest known key:
//   run.yaml:7: unknown key 'train.learnig_rate' (did you mean 'learning_rate'?)
// So the list of known keys is the reading code itself, never a second copy: for `tessera
// train` that is the field declarations of the options structs (tessera/core/options_binding.hpp,
// train_config.hpp), read through YamlFieldReader (options_yaml.hpp).
//
// Every failure (unreadable file, malformed YAML, wrong type, unknown or duplicate key) is a
// tessera::Error whose message starts with "FILE:LINE:" (lines 1-based); nothing else is
// thrown, whatever the input (the config fuzz target relies on that). Torch-free.
// Not thread-safe: one reader at a time.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "tessera/core/error.hpp"

namespace tessera::engine {

namespace detail {
struct ConfigState {
  std::string name;                                   ///< the file as the user named it
  std::map<std::string, std::set<std::string>> known;  ///< schema path ("", "train", "data.pairs[]") → keys asked for
};
/// What a read of T expects, for type errors: "an integer", "a list of numbers", …
template <class T>
const char* yaml_type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_integral_v<T>) return std::is_unsigned_v<T> ? "a non-negative integer" : "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return "a list of strings";
  else if constexpr (std::is_same_v<T, std::vector<double>> || std::is_same_v<T, std::vector<float>>) return "a list of numbers";
  else return "a value of another type";
}
}  // namespace detail

/// One mapping of a config: the root, `train`, `train.loss`, one entry of `data.pairs`.
/// A cheap view; the ConfigFile it came from must outlive it. An absent section reads as
/// empty (every read returns false) but still registers the keys asked for.
class ConfigSection {
 public:
  /// Reads `key` into `out` when present (leaves `out` alone and returns false when not).
  /// Throws "FILE:LINE: train.batch: expected an integer, got 'four'".
  template <class T>
  bool read(const std::string& key, T& out) const {
    const YAML::Node v = lookup(key);
    if (!v.IsDefined() || v.IsNull()) return false;
    try {
      out = v.as<T>();
    } catch (const YAML::Exception&) {
      throw_wrong_type(key, v, detail::yaml_type_name<T>());
    }
    return true;
  }
  /// Reads a string and converts it with `parse` (e.g. parse_optimizer_kind); an Error from
  /// `parse` gains the file, line and key.
  template <class T, class Parse>
  bool read_as(const std::string& key, T& out, Parse parse) const {
    std::string text;
    if (!read(key, text)) return false;
    try {
      out = parse(text);
    } catch (const Error& e) {
      throw Error(where(key) + ": " + dotted(key) + ": " + e.what());
    }
    return true;
  }
  /// Whether the document has `key` (registers it as known).
  bool has(const std::string& key) const;
  /// The mapping under `key`; absent or empty reads as an empty section. Throws when the
  /// value is not a mapping.
  ConfigSection section(const std::string& key) const;
  /// The mappings listed under `key` (e.g. data.pairs); absent reads as none. Throws when
  /// the value is not a list of mappings.
  std::vector<ConfigSection> list(const std::string& key) const;

  /// "FILE:LINE" of `key` (of this section when the key is absent; "FILE" when unknown).
  std::string where(const std::string& key = {}) const;
  /// The key's full name for messages: "train.loss.kind", "data.pairs[1].image".
  std::string dotted(const std::string& key) const;

 private:
  friend class ConfigFile;
  ConfigSection(std::shared_ptr<detail::ConfigState> state, YAML::Node node, std::string schema, std::string display);
  YAML::Node lookup(const std::string& key) const;  // registers `key`
  [[noreturn]] void throw_wrong_type(const std::string& key, const YAML::Node& v, const char* expected) const;

  std::shared_ptr<detail::ConfigState> state_;
  YAML::Node node_;      // a mapping, or Null when absent
  std::string schema_;   // "train.loss", "data.pairs[]": where known keys are recorded
  std::string display_;  // "train.loss", "data.pairs[1]": what messages show
};

class ConfigFile {
 public:
  /// Reads a file. Throws "<path>: no such config file" or "<path>:LINE: not valid YAML: …".
  static ConfigFile load(const std::string& path);
  /// Parses `text` as if it were the file `name` (tests, fuzzing). Never crashes or hangs:
  /// any input either parses or throws tessera::Error.
  static ConfigFile parse(const std::string& text, const std::string& name);

  /// The top-level mapping.
  ConfigSection root() const;
  /// Throws for the first key in the document that no read asked for, or a key given twice,
  /// with file, line and (when one is close) the known key meant. Call after reading
  /// everything.
  void reject_unknown_keys() const;

  const std::string& name() const { return state_->name; }
  /// The document as parsed (for writing a resolved copy: clone it before changing it).
  const YAML::Node& document() const { return doc_; }

 private:
  ConfigFile(std::shared_ptr<detail::ConfigState> state, YAML::Node doc);
  void check_map(const YAML::Node& map, const std::string& schema, const std::string& display) const;

  std::shared_ptr<detail::ConfigState> state_;
  YAML::Node doc_;
};

/// The known key nearest to `key` by edit distance, or "" when none is plausibly meant.
std::string closest_key(const std::string& key, const std::set<std::string>& known);

}  // namespace tessera::engine
