#pragma once
// The CLI side of the options binding (tessera/core/options_binding.hpp): flags that set
// declared fields, named after their key (`base_filters` → --base-filters), with older
// spellings kept as aliases (--filters). Values are typed as the field (CLI11 refuses
// `--levels four`); an enum flag's text is parsed when applied, by the enum's parse_value.
// Flags override whatever the options held before (a preset, a config file): apply() runs
// after those are read. The CLI11 callbacks point at the object add_to() was called on: keep
// it where it is (a copy made after parsing holds the given values too).
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "tessera/core/options_binding.hpp"

namespace tessera::cli {

/// --<key> for a dotted key: the last component, '_' → '-' ("train.warmup_steps" → --warmup-steps).
inline std::string flag_name(const std::string& key) {
  std::string leaf = key.substr(key.rfind('.') + 1);
  for (char& ch : leaf)
    if (ch == '_') ch = '-';
  return "--" + leaf;
}

template <class O>
class FlagOverrides {
 public:
  struct Flag {
    std::string key;      ///< dotted key of a declared field
    std::string aliases;  ///< "" or further names, "--filters" or "--lr,--learning"
  };

  /// Adds one option to `cmd` per entry of `flags`, with the field's help text. Throws
  /// std::logic_error for a key O does not declare.
  void add_to(CLI::App* cmd, const std::vector<Flag>& flags) {
    Registrar r(this, cmd, flags);
    O prototype{};
    fields(prototype, r);
    if (r.added != flags.size()) throw std::logic_error("FlagOverrides: a flag names no declared field");
  }

  /// Sets every field whose flag was given.
  void apply(O& o) const {
    for (const auto& [key, set] : pending_) set(o);
  }
  /// The value of the flag for `key` as text, when given.
  std::optional<std::string> given(const std::string& key) const {
    const auto it = text_.find(key);
    if (it == text_.end()) return std::nullopt;
    return it->second;
  }
  /// The text of every flag given, by key.
  const std::map<std::string, std::string>& given_all() const { return text_; }

 private:
  template <class T>
  void record(const std::string& key, const T& value) {
    pending_.emplace_back(key, [key, value](O& o) { set_field(o, key, value); });
    if constexpr (std::is_same_v<T, std::string>) {
      text_[key] = value;
    } else {
      std::ostringstream s;
      s.precision(17);
      s << std::boolalpha << value;
      text_[key] = s.str();
    }
  }

  struct Registrar : options_detail::DottedVisitor<Registrar> {
    Registrar(FlagOverrides* s, CLI::App* c, const std::vector<Flag>& f) : self(s), cmd(c), flags(f) {}
    FlagOverrides* self;
    CLI::App* cmd;
    const std::vector<Flag>& flags;
    size_t added = 0;

    template <class M>
    void field(const char* key, M&, const char* help) {
      const std::string path = this->prefix + key;
      for (const Flag& f : flags) {
        if (f.key != path) continue;
        const std::string names = flag_name(path) + (f.aliases.empty() ? "" : "," + f.aliases);
        FlagOverrides* s = self;
        if constexpr (std::is_same_v<M, bool>)
          cmd->add_flag_function(names, [s, path](std::int64_t) { s->record(path, true); }, help);
        else if constexpr (std::is_enum_v<M>)
          cmd->add_option_function<std::string>(names, [s, path](const std::string& v) { s->record(path, v); }, help);
        else
          cmd->add_option_function<M>(names, [s, path](const M& v) { s->record(path, v); }, help);
        ++added;
      }
    }
    template <class S>
    void list(const char*, std::vector<S>&, const char*) {}
  };

  std::vector<std::pair<std::string, std::function<void(O&)>>> pending_;
  std::map<std::string, std::string> text_;
};

namespace detail {
template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

// add_field_flags' visitor: one flag per declared field, bound to the field.
struct FieldFlagBinder : options_detail::DottedVisitor<FieldFlagBinder> {
  CLI::App* cmd = nullptr;
  const std::map<std::string, std::string>* aliases = nullptr;
  std::string names(const std::string& key, bool negated) const {
    std::string n = negated ? "--no-" + flag_name(key).substr(2) : flag_name(key);
    const auto it = aliases->find(key);
    return it == aliases->end() ? n : n + "," + it->second;
  }
  template <class M>
  void field(const char* key, M& m, const char* help) {
    const std::string path = this->prefix + key;
    if constexpr (std::is_same_v<M, bool>) {
      if (m) cmd->add_flag_callback(names(path, true), [&m] { m = false; }, help);
      else cmd->add_flag(names(path, false), m, help);
    } else if constexpr (std::is_enum_v<M>) {
      cmd->add_option_function<std::string>(names(path, false), [&m](const std::string& v) { parse_value(v, m); }, help)
          ->default_str(value_name(m));
    } else if constexpr (is_vector<M>::value) {
      cmd->add_option(names(path, false), m, help)->delimiter(',')->capture_default_str();
    } else {
      cmd->add_option(names(path, false), m, help)->capture_default_str();
    }
  }
  template <class S>
  void list(const char*, std::vector<S>&, const char*) {}
};
}  // namespace detail

/// Binds every declared field of `o` to a flag of `cmd` (options declared once: the flag, its
/// help and its shown default come from the declaration): --<key> with dashes (min_area →
/// --min-area), the value parsed into the field as its type (an enum through parse_value; a
/// list as words or comma-separated, --micro 1,2,4);
/// a bool field that holds true is --no-<key> (it turns it off), one that holds false is
/// --<key>. `aliases` adds names per key. The callbacks point at `o`: keep it where it is
/// until parsing is done.
template <class O>
void add_field_flags(CLI::App* cmd, O& o, const std::map<std::string, std::string>& aliases = {}) {
  detail::FieldFlagBinder binder;
  binder.cmd = cmd;
  binder.aliases = &aliases;
  fields(o, binder);
}

}  // namespace tessera::cli
