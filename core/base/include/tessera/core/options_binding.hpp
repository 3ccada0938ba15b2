#pragma once
// One declaration of an options struct's fields, read by every place that maps the struct to
// text: the YAML config (cli/options_yaml.hpp), the resolved config.yaml, CLI flags
// (cli/options_cli.hpp) and checkpoint JSON (model_json.hpp). One key spelling everywhere.
//
// The declaration is a function template found by argument-dependent lookup,
//   template <class V> void fields(Options& o, V& v);
// which calls, for every field, in a fixed order:
//   v.field(key, o.member, help)        a number, bool, string, enum or vector of those
//   v.section(key, o.member, help)      a nested options struct with its own fields(): a mapping
//   v.list(key, o.members, help)        a std::vector of such structs: a list of mappings
// A struct whose fields sit flat in its parent's mapping (TrainOptions' optimizer fields) is
// declared by calling its fields(o.member, v) from the parent's declaration.
// Enums are text: each enum has `parse_value(text, E&)` (throws tessera::Error naming the
// accepted values) and `value_name(E)` beside its fields() declaration.
//
// Visitors get the member by reference; a visitor that only reads (a writer) is handed a copy
// of the options. Torch-free; the declarations here are for the torch-free structs.
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/core/unet_spec.hpp"

namespace tessera {

// ---- UNetOptions -----------------------------------------------------------------------

inline void parse_value(const std::string& s, Padding& v) { v = parse_padding(s); }
inline void parse_value(const std::string& s, Norm& v) { v = parse_norm(s); }
inline void parse_value(const std::string& s, Decoder& v) { v = parse_decoder(s); }
inline std::string value_name(Padding v) { return to_string(v); }
inline std::string value_name(Norm v) { return to_string(v); }
inline std::string value_name(Decoder v) { return to_string(v); }

/// The YAML `model:` keys, the checkpoint JSON "model" keys and the model flags (--base-filters …).
template <class V>
void fields(UNetOptions& o, V& v) {
  v.field("name", o.name, "unet (the built-in family), or a registered model such as se-unet (a plugin)");
  v.field("dims", o.dims, "2 or 3 spatial dimensions");
  v.field("in_channels", o.in_channels, "Input channels (bands)");
  v.field("classes", o.classes, "Number of output classes");
  v.field("levels", o.levels, "L, the number of levels (including the bottom one)");
  v.field("convs_per_level", o.convs_per_level, "n_c, convolutions per level");
  v.field("base_filters", o.base_filters, "f, the filters of the first level (doubling per level)");
  v.field("kernel", o.kernel, "K, the convolution kernel side (odd)");
  v.field("padding", o.padding, "valid (exact tiling) or same");
  v.field("norm", o.norm, "none, batch, group or instance");
  v.field("decoder", o.decoder, "transposed or upsample");
}

// ---- generic helpers over a declaration ----------------------------------------------

namespace options_detail {

// Base of the visitors that name a field by its dotted path ("train.loss.kind"): section()
// descends into the nested struct with its key appended to `prefix`.
template <class Derived>
struct DottedVisitor {
  std::string prefix;
  template <class S>
  void section(const char* key, S& s, const char*) {
    const std::string saved = prefix;
    prefix += std::string(key) + ".";
    fields(s, static_cast<Derived&>(*this));
    prefix = saved;
  }
};

// Collects the dotted keys of every field ("train.loss.kind"; a list is one key).
struct KeyLister : DottedVisitor<KeyLister> {
  std::vector<std::string> keys;
  template <class M>
  void field(const char* key, M&, const char*) { keys.push_back(prefix + key); }
  template <class S>
  void list(const char* key, std::vector<S>&, const char*) { keys.push_back(prefix + key); }
};

// Assigns `value` to the field at dotted `path`; text is parsed for an enum field.
template <class T>
struct FieldSetter : DottedVisitor<FieldSetter<T>> {
  FieldSetter(const std::string& p, const T& v) : path(p), value(v) {}
  const std::string& path;
  const T& value;
  bool found = false;
  template <class M>
  void field(const char* key, M& m, const char*) {
    if (this->prefix + key != path) return;
    found = true;
    if constexpr (std::is_enum_v<M> && std::is_convertible_v<const T&, std::string>)
      parse_value(std::string(value), m);
    else if constexpr (std::is_same_v<M, T>)
      m = value;
    else
      found = false;  // a field of another type: not this one
  }
  template <class S>
  void list(const char*, std::vector<S>&, const char*) {}
};

}  // namespace options_detail

/// Every declared key of `O`, dotted ("train.loss.kind"), in declaration order.
template <class O>
std::vector<std::string> field_keys(O o) {
  options_detail::KeyLister lister;
  fields(o, lister);
  return lister.keys;
}

/// Sets the field at dotted `path` ("parallel.dp") to `value` (of the field's type, or text
/// for an enum field). Returns false when `O` declares no such field of that type.
template <class O, class T>
bool set_field(O& o, const std::string& path, const T& value) {
  options_detail::FieldSetter<T> setter(path, value);
  fields(o, setter);
  return setter.found;
}

}  // namespace tessera
