#pragma once
// "Each flag sets the field its key sets", for any options struct bound to a command with
// add_field_flags (cli/options_cli.hpp): for every declared field, a parse of its flag (and of
// each alias) with a value other than the default must change that field to the value and no
// other field. The value is made from the field's type: a number one more than the default
// (plus a half for floating point), a string of its own, a bool flipped (--no-<key> for a
// field that defaults to true), a list of two elements; an enum takes its sample from
// `samples` (text, by dotted key), where a test may also replace any other sample.
//
//   EXPECT_EQ(every_flag_sets_its_field<engine::InferOptions>(), "");
//
// Returns "" or one line per problem.
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "options_cli.hpp"
#include "tessera/core/options_binding.hpp"

namespace tessera::test {

namespace flag_fields_detail {

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {
  using element = T;
};

template <class M>
std::string text_of(const M& m) {
  std::ostringstream s;
  s.precision(17);
  if constexpr (std::is_enum_v<M>) {
    s << value_name(m);
  } else if constexpr (is_vector<M>::value) {
    s << "[";
    for (size_t i = 0; i < m.size(); ++i) s << (i ? ", " : "") << text_of(m[i]);
    s << "]";
  } else {
    s << std::boolalpha << m;
  }
  return s.str();
}

// Every declared field's value as text, by dotted key.
struct Texts : options_detail::DottedVisitor<Texts> {
  std::map<std::string, std::string> values;
  template <class M>
  void field(const char* key, M& m, const char*) { values[this->prefix + key] = text_of(m); }
  template <class S>
  void list(const char*, std::vector<S>&, const char*) {}
};

template <class M>
std::vector<std::string> sample_words(const M& m) {
  if constexpr (std::is_same_v<M, std::string>) {
    return {m + "sample"};
  } else if constexpr (std::is_floating_point_v<M>) {
    std::ostringstream s;
    s.precision(17);
    s << m + 1.5;
    return {s.str()};
  } else if constexpr (std::is_integral_v<M>) {
    return {std::to_string(m + 1)};
  } else if constexpr (is_vector<M>::value) {
    using E = typename is_vector<M>::element;
    std::vector<std::string> out = sample_words(E{});
    const std::vector<std::string> second = sample_words(E{} + E{});
    out.insert(out.end(), second.begin(), second.end());
    if (out.size() == 2 && out[0] == out[1]) out[1] += std::is_same_v<E, std::string> ? "2" : "";
    return out;
  } else {
    return {};
  }
}

// One parse per field and flag name: the arguments, and the field's expected text.
struct Case {
  std::string key, flag;
  std::vector<std::string> args;  // after the flag
};

struct CaseMaker : options_detail::DottedVisitor<CaseMaker> {
  const std::map<std::string, std::string>* samples = nullptr;
  const std::map<std::string, std::string>* aliases = nullptr;
  std::vector<Case> cases;
  std::vector<std::string> problems;
  template <class M>
  void field(const char* key, M& m, const char*) {
    const std::string path = this->prefix + key;
    std::vector<std::string> names;
    std::vector<std::string> args;
    if constexpr (std::is_same_v<M, bool>) {
      names.push_back(m ? "--no-" + cli::flag_name(path).substr(2) : cli::flag_name(path));
    } else {
      names.push_back(cli::flag_name(path));
      const auto given = samples->find(path);
      if (given != samples->end()) {
        args.push_back(given->second);
      } else if constexpr (std::is_enum_v<M>) {
        problems.push_back(path + ": an enum field needs a sample value");
        return;
      } else {
        args = sample_words(m);
      }
    }
    const auto alias = aliases->find(path);
    if (alias != aliases->end()) {
      std::stringstream list(alias->second);
      for (std::string name; std::getline(list, name, ',');) names.push_back(name);
    }
    for (const std::string& name : names) cases.push_back({path, name, args});
  }
  template <class S>
  void list(const char*, std::vector<S>&, const char*) {}
};

}  // namespace flag_fields_detail

/// "" when every flag of O (and every alias in `aliases`, "key" → "--a,--b") sets its own
/// field to the value given and leaves every other field at its default; else the problems.
template <class O>
std::string every_flag_sets_its_field(const std::map<std::string, std::string>& samples = {},
                                      const std::map<std::string, std::string>& aliases = {}) {
  using namespace flag_fields_detail;
  O prototype{};
  CaseMaker maker;
  maker.samples = &samples;
  maker.aliases = &aliases;
  fields(prototype, maker);
  std::string report;
  for (const std::string& p : maker.problems) report += p + "\n";
  Texts defaults;
  O d{};
  fields(d, defaults);
  for (const Case& c : maker.cases) {
    O o{};
    CLI::App app("flag_fields");
    cli::add_field_flags(&app, o, aliases);
    std::vector<std::string> argv{c.flag};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    std::vector<std::string> reversed(argv.rbegin(), argv.rend());  // CLI11 parses a reversed vector
    try {
      app.parse(reversed);
    } catch (const std::exception& e) {
      report += c.flag + ": does not parse (" + e.what() + ")\n";
      continue;
    }
    Texts after;
    fields(o, after);
    for (const auto& [key, value] : after.values) {
      const std::string& before = defaults.values[key];
      if (key == c.key && value == before) report += c.flag + ": left " + key + " at its default " + before + "\n";
      if (key != c.key && value != before) report += c.flag + ": also changed " + key + " to " + value + "\n";
    }
  }
  return report;
}

}  // namespace tessera::test
