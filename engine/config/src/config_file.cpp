#include "tessera/engine/config_file.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

namespace tessera::engine {
namespace {

// Counts the documents of a YAML stream (parse() stops at two). Not YAML::LoadAll: in
// yaml-cpp 0.7 it never returns, allocating without bound, on a ',' outside any list or
// mapping, where the parser reports one empty document after another at the same place
// (found by tests/fuzz/fuzz_config; tests/fuzz/regressions/config/stray_comma.yaml).
struct DocumentCount final : YAML::EventHandler {
  int documents = 0;
  YAML::Mark first, second;
  void OnDocumentStart(const YAML::Mark& mark) override { (documents++ == 0 ? first : second) = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

std::string location(const std::string& name, const YAML::Mark& mark) {
  return mark.line >= 0 ? name + ":" + std::to_string(mark.line + 1) : name;
}

std::string join(const std::string& parent, const std::string& key) { return parent.empty() ? key : parent + "." + key; }

// What the document holds instead of what was expected, for messages.
std::string describe(const YAML::Node& v) {
  if (v.IsSequence()) return "a list";
  if (v.IsMap()) return "a mapping";
  if (!v.IsScalar()) return "nothing";
  std::string s = v.Scalar();
  if (s.size() > 40) s = s.substr(0, 40) + "…";
  return "'" + s + "'";
}

std::string node_kind(const YAML::Node& n) { return n.IsSequence() ? "a list" : n.IsScalar() ? "a single value" : "nothing"; }

// Levenshtein distance (insert, delete, substitute: 1 each).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// "under 'train'", "at the top level", "in each entry of 'data.pairs'".
std::string place(const std::string& schema) {
  if (schema.empty()) return "at the top level";
  if (schema.size() > 2 && schema.compare(schema.size() - 2, 2, "[]") == 0)
    return "in each entry of '" + schema.substr(0, schema.size() - 2) + "'";
  return "under '" + schema + "'";
}

std::string list_keys(const std::set<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

}  // namespace

std::string closest_key(const std::string& key, const std::set<std::string>& known) {
  constexpr size_t kLongest = 64;  // longer is no typo of a key; and bounds the work
  if (key.size() > kLongest) return {};
  std::string best;
  size_t best_distance = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& k : known)
    if (const size_t d = edit_distance(key, k); d < best_distance) {
      best = k;
      best_distance = d;
    }
  return best;
}

// ---- ConfigSection -------------------------------------------------------------------

ConfigSection::ConfigSection(std::shared_ptr<detail::ConfigState> state, YAML::Node node, std::string schema,
                             std::string display)
    : state_(std::move(state)), node_(std::move(node)), schema_(std::move(schema)), display_(std::move(display)) {}

YAML::Node ConfigSection::lookup(const std::string& key) const {
  state_->known[schema_].insert(key);
  if (!node_.IsMap()) return YAML::Node();
  const YAML::Node& map = node_;
  return map[key];
}

bool ConfigSection::has(const std::string& key) const {
  const YAML::Node v = lookup(key);
  return v.IsDefined() && !v.IsNull();
}

std::string ConfigSection::dotted(const std::string& key) const { return join(display_, key); }

std::string ConfigSection::where(const std::string& key) const {
  if (!key.empty() && node_.IsMap()) {
    const YAML::Node& map = node_;
    if (const YAML::Node v = map[key]; v.IsDefined()) return location(state_->name, v.Mark());
  }
  return location(state_->name, node_.Mark());
}

void ConfigSection::throw_wrong_type(const std::string& key, const YAML::Node& v, const char* expected) const {
  throw Error(where(key) + ": " + dotted(key) + ": expected " + expected + ", got " + describe(v));
}

ConfigSection ConfigSection::section(const std::string& key) const {
  const YAML::Node v = lookup(key);
  const std::string schema = join(schema_, key);
  state_->known[schema];  // asked for: its keys are checked, even if none is read
  if (!v.IsDefined() || v.IsNull()) return ConfigSection(state_, YAML::Node(), schema, dotted(key));
  if (!v.IsMap())
    throw Error(where(key) + ": " + dotted(key) + ": expected a mapping of keys, got " + describe(v));
  return ConfigSection(state_, v, schema, dotted(key));
}

std::vector<ConfigSection> ConfigSection::list(const std::string& key) const {
  const YAML::Node v = lookup(key);
  const std::string schema = join(schema_, key) + "[]";
  state_->known[schema];
  std::vector<ConfigSection> out;
  if (!v.IsDefined() || v.IsNull()) return out;
  if (!v.IsSequence())
    throw Error(where(key) + ": " + dotted(key) + ": expected a list of mappings, got " + describe(v));
  for (const YAML::Node& e : v) {
    const std::string display = dotted(key) + "[" + std::to_string(out.size()) + "]";
    if (!e.IsMap())
      throw Error(location(state_->name, e.Mark()) + ": " + display + ": expected a mapping of keys, got " + describe(e));
    out.push_back(ConfigSection(state_, e, schema, display));
  }
  return out;
}

// ---- ConfigFile ----------------------------------------------------------------------

ConfigFile::ConfigFile(std::shared_ptr<detail::ConfigState> state, YAML::Node doc)
    : state_(std::move(state)), doc_(std::move(doc)) {}

ConfigFile ConfigFile::load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(path + ": no such config file");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw Error(path + ": cannot read the config file");
  return parse(text.str(), path);
}

ConfigFile ConfigFile::parse(const std::string& text, const std::string& name) {
  DocumentCount count;
  YAML::Node doc;
  try {
    std::istringstream stream(text);
    YAML::Parser parser(stream);
    while (count.documents < 2 && parser.HandleNextDocument(count)) {
    }
    if (count.documents < 2) doc = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    throw Error(location(name, e.mark) + ": not valid YAML: nested more than " + std::to_string(e.depth()) + " levels deep");
  } catch (const YAML::Exception& e) {
    throw Error(location(name, e.mark) + ": not valid YAML: " + e.msg);
  } catch (const std::exception& e) {
    throw Error(name + ": not valid YAML: " + e.what());
  }
  if (count.documents > 1 && count.second.pos == count.first.pos)  // the parser made no progress
    throw Error(location(name, count.second) + ": not valid YAML: unexpected '" +
                text.substr(static_cast<size_t>(std::max(count.second.pos, 0)), 1) + "' outside a list or mapping");
  if (count.documents > 1) throw Error(location(name, count.second) + ": a config is one YAML document, this is the second");
  if (!doc.IsNull() && !doc.IsMap())
    throw Error(location(name, doc.Mark()) + ": a config is a mapping of keys (run_dir, model, data, train), not " +
                node_kind(doc));
  auto state = std::make_shared<detail::ConfigState>();
  state->name = name;
  return ConfigFile(std::move(state), std::move(doc));
}

ConfigSection ConfigFile::root() const { return ConfigSection(state_, doc_, "", ""); }

void ConfigFile::reject_unknown_keys() const {
  if (doc_.IsMap()) check_map(doc_, "", "");
}

void ConfigFile::check_map(const YAML::Node& map, const std::string& schema, const std::string& display) const {
  static const std::set<std::string> kNone;
  const auto found = state_->known.find(schema);
  const std::set<std::string>& known = found == state_->known.end() ? kNone : found->second;
  std::map<std::string, int> first_line;
  for (auto it = map.begin(); it != map.end(); ++it) {
    // Copies (cheap handles): `it->` yields a temporary, and a reference into it dangles
    // after this line (AddressSanitizer: stack-use-after-scope, found by fuzz_config).
    const YAML::Node k = it->first;
    const YAML::Node v = it->second;
    const std::string at = location(state_->name, k.Mark());
    if (!k.IsScalar()) throw Error(at + ": " + (display.empty() ? "" : display + ": ") + "a key must be a plain name");
    const std::string name = k.Scalar(), full = join(display, name);
    if (const auto [seen, fresh] = first_line.emplace(name, k.Mark().line + 1); !fresh)
      throw Error(at + ": key '" + full + "' given twice (first on line " + std::to_string(seen->second) + ")");
    if (!known.count(name)) {
      std::string hint;
      if (const std::string near = closest_key(name, known); !near.empty()) {
        hint = " (did you mean '" + near + "'?)";
      } else {
        for (const auto& [other, keys] : state_->known)  // the right key in the wrong place
          if (other != schema && keys.count(name)) hint = " (it belongs " + place(other) + ")";
        if (hint.empty() && !known.empty()) hint = " (known here: " + list_keys(known) + ")";
      }
      throw Error(at + ": unknown key '" + full + "'" + hint);
    }
    const std::string child = join(schema, name);
    if (v.IsMap() && state_->known.count(child)) {
      check_map(v, child, full);
    } else if (v.IsSequence() && state_->known.count(child + "[]")) {
      size_t i = 0;
      for (const YAML::Node& e : v) {
        if (e.IsMap()) check_map(e, child + "[]", full + "[" + std::to_string(i) + "]");
        ++i;
      }
    }
  }
}

}  // namespace tessera::engine
