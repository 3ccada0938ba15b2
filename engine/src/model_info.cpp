#include "tessera/engine/model_info.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/dsn_spec.hpp"
#include "tessera/core/dsn_training.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/core/model_registry.hpp"
#include "tessera/core/options_binding.hpp"
#include "tessera/core/plugin_loader.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/preprocessing.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/io/normalization.hpp"

namespace tessera::engine {
namespace {

// The registry with every plugin found; refused plugins are warnings, not failures, so one
// broken file in a shared plugin directory does not stop the command.
ModelRegistry registry_with_plugins() {
  ModelRegistry registry;
  for (const auto& error : load_plugins(registry).errors) std::fprintf(stderr, "tessera: warning: %s\n", error.c_str());
  return registry;
}

void print_list(bool json) {
  const ModelRegistry r = registry_with_plugins();
  if (json) {
    auto entries = [](const auto& list) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : list) a.push_back({{"name", e.name}, {"description", e.description}, {"origin", e.origin}});
      return a;
    };
    nlohmann::json j{{"models", entries(r.models())},
                     {"losses", entries(r.losses())},
                     {"post_processors", entries(r.post_processors())}};
    std::cout << j.dump(2) << '\n';
    return;
  }
  auto section = [](const char* title, const auto& list) {
    std::printf("%s:\n", title);
    size_t width = 0;
    for (const auto& e : list) width = std::max(width, e.name.size());
    for (const auto& e : list)
      std::printf("  %-*s  %s%s%s\n", int(width), e.name.c_str(), e.description.c_str(),
                  e.origin == "built-in" ? "" : "  [plugin ", e.origin == "built-in" ? "" : (e.origin + "]").c_str());
  };
  section("models", r.models());
  section("losses", r.losses());
  section("post-processors", r.post_processors());
}

// Any other registered architecture (a plugin's, or plain "unet"): what the registry can tell
// without the U-Net arithmetic.
void print_plugin_model(const ModelInfoOptions& f) {
  const ModelRegistry r = registry_with_plugins();
  // The plugin API's names for the UNetOptions flags given.
  auto given = [&](const char* key) -> const std::string* {
    const auto it = f.model_overrides.find(key);
    return it == f.model_overrides.end() ? nullptr : &it->second;
  };
  auto number = [&](const char* key) -> std::optional<int> {
    if (const std::string* text = given(key)) return std::stoi(*text);
    return std::nullopt;
  };
  ModelOptions o;
  o.dims = number("dims");
  o.in_channels = number("in_channels");
  o.classes = number("classes");
  o.filters = number("base_filters");
  o.levels = number("levels");
  for (const auto& [key, plugin_key] : {std::pair{"convs_per_level", "convs"}, {"kernel", "kernel"}, {"norm", "norm"},
                                        {"padding", "padding"}, {"decoder", "decoder"}})
    if (const std::string* text = given(key)) o.with(plugin_key, *text);
  const ModelEntry& entry = r.model(f.model_preset);
  const ModelHandle model = r.create(f.model_preset, o);
  int64_t params = 0;
  for (const auto& p : model.module->parameters()) params += p.numel();
  if (f.json) {
    std::cout << nlohmann::json{{"model", entry.name}, {"description", entry.description}, {"origin", entry.origin},
                                {"params", params}}.dump(2)
              << '\n';
    return;
  }
  std::printf("%s: %s\n", entry.name.c_str(), entry.description.c_str());
  std::printf("  from                    %s\n", entry.origin.c_str());
  std::printf("  parameters              %lld (%.1f MiB as float32)\n", (long long)params, params * 4.0 / (1 << 20));
}

bool is_unet_preset(const std::string& name) {
  const auto presets = unet_preset_names();
  return std::find(presets.begin(), presets.end(), name) != presets.end();
}

// Sets the UNetOptions field `key` from its flag's text (already typed-checked by the flag).
struct TextSetter : options_detail::DottedVisitor<TextSetter> {
  TextSetter(const std::string& k, const std::string& t) : key(k), text(t) {}
  const std::string& key;
  const std::string& text;
  template <class M>
  void field(const char* name, M& m, const char*) {
    if (prefix + name != key) return;
    if constexpr (std::is_enum_v<M>) parse_value(text, m);
    else if constexpr (std::is_same_v<M, std::string>) m = text;
    else if constexpr (std::is_same_v<M, bool>) m = text == "true";
    else std::istringstream(text) >> m;
  }
  template <class S>
  void list(const char*, std::vector<S>&, const char*) {}
};

// --model PRESET with its overrides, validated.
UNetOptions resolved_unet(const ModelInfoOptions& f) {
  UNetOptions o = unet_preset(f.model_preset);
  for (const auto& [key, text] : f.model_overrides) {
    TextSetter setter(key, text);
    fields(o, setter);
  }
  o.validate();
  return o;
}

// A registry model's count comes from the module its factory builds; the U-Net's from arithmetic.
int64_t parameter_count(const UNetOptions& o) {
  if (o.is_builtin()) return unet_parameter_count(o);
  int64_t n = 0;
  for (const auto& p : UNet(o)->parameters()) n += p.numel();
  return n;
}

// A DSN's parts beside the U-Net (the shared encoder, task decoder and head).
struct DsnParts {
  int64_t priv = 0, recon = 0, classifier = 0;
};

nlohmann::json model_json(const std::string& name, const UNetOptions& o, const std::optional<DsnOptions>& dsn,
                          const CheckpointMeta* meta, const DsnParts& parts) {
  nlohmann::json j = o;  // the checkpoint's spelling of the options (model_json.hpp)
  if (meta) {  // what inference repeats: the checkpoint's spelling (checkpoint.hpp)
    const nlohmann::json m = *meta;
    j["normalization"] = m.at("normalization");
    if (m.contains("resampling")) j["resampling"] = m.at("resampling");
    for (const char* key : {"class_names", "background", "inputs"})
      if (m.contains(key)) j[key] = m.at(key);
    nlohmann::json colors = nlohmann::json::array();  // every class's, defaults included
    for (int k = 0; k < o.classes; ++k) colors.push_back(hex_color(class_color(meta->class_colors, k)));
    j["class_colors"] = colors;
  }
  j.update(nlohmann::json{{"model", name},
                          {"params", parameter_count(o)},
                          {"layers", unet_layer_count(o)},
                          {"halo", unet_halo(o)},
                          {"remainder", unet_remainder(o)},
                          {"alignment", unet_alignment(o)},
                          {"receptive_field", unet_receptive_field(o)},
                          {"flops_per_output_pixel", unet_flops_per_output_pixel(o)}});
  if (!dsn) return j;
  nlohmann::json options;
  options_to_json(options, *dsn);
  const int64_t unet = unet_parameter_count(o);
  j["dsn"] = {{"domains", dsn->domains},
              {"options", options},
              {"code_channels", dsn_code_channels(o)},
              {"private_encoder_params", parts.priv},
              {"reconstruction_decoder_params", parts.recon},
              {"domain_classifier_params", parts.classifier},
              {"total_params", unet + dsn->domains * parts.priv + parts.recon + parts.classifier},
              {"params_per_rank_one_domain", unet + parts.priv + parts.recon + parts.classifier}};
  return j;
}

std::string numbers(const std::vector<double>& v, const char* sep) {
  std::string s;
  for (size_t k = 0; k < v.size(); ++k) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4g", v[k]);
    s += (k ? sep : "") + std::string(text);
  }
  return s;
}

// What a checkpoint says about its inputs and classes: what `tessera infer` checks an input
// against, and the names and colours every output uses.
void print_training_inputs(const UNetOptions& o, const CheckpointMeta& meta) {
  const TrainingInputs& in = meta.inputs;
  std::string trained;
  if (!in.modality.empty()) trained += in.modality + "; ";
  for (size_t c = 0; c < in.low.size() && c < in.high.size(); ++c)
    trained += "channel " + std::to_string(c + 1) + " [" + numbers({in.low[c], in.high[c]}, ", ") + "]" +
               (c + 1 < in.low.size() ? ", " : " (1st-99th percentile); ");
  if (!in.spacing.empty()) {
    std::vector<double> x_first(in.spacing.rbegin(), in.spacing.rend());
    trained += "pixel " + numbers(x_first, " x ") + " " + in.spacing_unit;
  }
  std::printf("  input channels          %d%s\n", o.in_channels,
              trained.empty() ? " (training inputs not recorded)" : (": " + trained).c_str());
  std::printf("  %s\n", describe_classes(meta.class_names, meta.class_colors, meta.background).c_str());
}

void print_unet_text(const std::string& name, const UNetOptions& o, const CheckpointMeta* meta) {
  const int64_t params = parameter_count(o);
  std::printf("%s: %d-D %s, L=%d, n_c=%d, f=%d, %s padding, %s norm, %s decoder\n", name.c_str(), o.dims,
              o.is_builtin() ? "U-Net" : o.name.c_str(), o.levels, o.convs_per_level, o.base_filters,
              to_string(o.padding).c_str(), to_string(o.norm).c_str(), to_string(o.decoder).c_str());
  std::printf("  parameters              %lld (%.1f MiB as float32)\n", (long long)params, params * 4.0 / (1 << 20));
  if (meta) {
    std::printf("  normalisation           %s\n", io::describe(meta->norm).c_str());
    std::printf("  resampling              %s\n", describe(meta->resampling).c_str());
    print_training_inputs(o, *meta);
  }
  if (!o.is_builtin())
    std::printf("  tile geometry           of the U-Net of the same shape (alignment, halo below); its own blocks\n"
                "                          may see further (SE, instance norm): tiles approximate the whole volume\n");
  std::printf("  layers                  %d\n", unet_layer_count(o));
  std::printf("  halo eps                %lld px per side\n", (long long)unet_halo(o));
  std::printf("  valid output sizes      S + %lld, S a multiple of %lld\n", (long long)unet_remainder(o),
              (long long)unet_alignment(o));
  std::printf("  receptive field         %lld px\n", (long long)unet_receptive_field(o));
  std::printf("  FLOPs per output pixel  %.3g (forward)\n", unet_flops_per_output_pixel(o));
}

void print_dsn_text(const UNetOptions& o, const DsnOptions& dsn, const DsnParts& p) {
  const int64_t unet = unet_parameter_count(o);
  std::printf("Domain Separation Network: 1 source + %d target%s, %s similarity (alpha %g, beta %g, gamma %g)\n",
              dsn.domains - 1, dsn.domains > 2 ? "s" : "", to_string(dsn.similarity).c_str(), dsn.alpha, dsn.beta,
              dsn.gamma);
  std::printf("  shared encoder + task decoder + head   the U-Net above (%lld); code %lld channels\n", (long long)unet,
              (long long)dsn_code_channels(o));
  std::printf("  private encoder (each domain)          %lld (p = %d)\n", (long long)p.priv, dsn.private_filters);
  std::printf("  shared reconstruction decoder          %lld (r = %d)\n", (long long)p.recon, dsn.recon_filters);
  std::printf("  domain classifier                      %lld (hidden %d)\n", (long long)p.classifier, dsn.classifier_hidden);
  std::printf("  whole DSN                              %lld (%.1f MiB); one rank per domain holds %lld\n",
              (long long)(unet + dsn.domains * p.priv + p.recon + p.classifier),
              (unet + dsn.domains * p.priv + p.recon + p.classifier) * 4.0 / (1 << 20),
              (long long)(unet + p.priv + p.recon + p.classifier));
  std::printf("  inference (any domain)                 the U-Net alone\n");
}

// The U-Net's arithmetic, and a DSN's parts when there is one.
void print_model(const std::string& name, const UNetOptions& o, const std::optional<DsnOptions>& dsn, bool json,
                 const CheckpointMeta* meta) {
  DsnParts parts;
  if (dsn)
    parts = {dsn_private_parameter_count(o, *dsn), dsn_recon_parameter_count(o, *dsn),
             dsn_classifier_parameter_count(o, *dsn)};
  if (json) {
    std::cout << model_json(name, o, dsn, meta, parts).dump(2) << '\n';
    return;
  }
  print_unet_text(name, o, meta);
  if (dsn) print_dsn_text(o, *dsn, parts);
}

// model: of a `tessera train` config (in_channels as written, else the preset's: train takes
// them from the first image).
void print_config_model(const std::string& path, bool json) {
  const RunConfig c = read_run_config(ConfigFile::load(path));
  std::optional<DsnOptions> dsn;
  if (c.model.is_dsn()) {
    dsn = c.model.dsn;
    dsn->domains = 1 + static_cast<int>(c.data.targets.size());
  }
  print_model(c.model.preset + " (" + path + ")", c.model.options, dsn, json, nullptr);
}

void print_checkpoint_model(const std::string& path, bool json) {
  const CheckpointMeta meta = read_checkpoint_meta(path);
  std::optional<DsnOptions> dsn;
  if (!meta.extra_model.empty()) {
    try {
      dsn = dsn_options_from_extra_model(meta.extra_model);
    } catch (const Error& e) {
      throw Error(path + ": " + e.what());
    }
  }
  print_model(path + " (step " + std::to_string(meta.step) + ")", meta.model, dsn, json, &meta);
}

}  // namespace

void ModelInfoOptions::validate() const {
  const std::string mode = list ? "--list" : !config.empty() ? "--config" : !checkpoint.empty() ? "--checkpoint" : "";
  if (int(list) + int(!config.empty()) + int(!checkpoint.empty()) > 1)
    throw Error("model-info: give at most one of --list, --config FILE, --checkpoint FILE");
  if (!mode.empty() && !model_overrides.empty()) {
    std::string flag = "--" + model_overrides.begin()->first;
    std::replace(flag.begin(), flag.end(), '_', '-');
    throw Error("model-info: " + flag + " is not used with " + mode + " (it describes --model's network)");
  }
}

void print_model_info(const ModelInfoOptions& o) {
  o.validate();
  if (o.list) return print_list(o.json);
  if (!o.config.empty()) return print_config_model(o.config, o.json);
  if (!o.checkpoint.empty()) return print_checkpoint_model(o.checkpoint, o.json);
  if (!is_unet_preset(o.model_preset)) return print_plugin_model(o);
  print_model(o.model_preset, resolved_unet(o), std::nullopt, o.json, nullptr);
}

}  // namespace tessera::engine
