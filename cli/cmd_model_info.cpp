// tessera model-info --model PRESET [overrides] [--json]: size, halo and cost of a network.
// tessera model-info --config FILE.yaml | --checkpoint FILE.pt: the same for a training
// config's model or a checkpoint's, with a Domain Separation Network's parts (kind dsn).
// tessera model-info --list [--json]: every registered architecture, loss and post-processor,
// built-in or from a plugin (TESSERA_PLUGIN_PATH, <exe>/../lib/tessera/plugins, the prefix).
#include <algorithm>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/core/checkpoint.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/io/normalization.hpp"
#include "tessera/engine/preprocessing.hpp"
#include "tessera/core/dsn_spec.hpp"
#include "tessera/core/dsn_trainer.hpp"
#include "tessera/core/model_json.hpp"
#include "model_options.hpp"
#include "tessera/core/model_registry.hpp"
#include "tessera/core/plugin_loader.hpp"

namespace tessera::cli {

using namespace ::tessera::engine;  // the engine library (engine/): transitional, until the command is thin
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
void print_plugin_model(const ModelFlags& flags, bool json) {
  const ModelRegistry r = registry_with_plugins();
  // The plugin API's names for the UNetOptions flags given.
  auto number = [&](const char* key) -> std::optional<int> {
    if (const auto text = flags.given(key)) return std::stoi(*text);
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
    if (const auto text = flags.given(key)) o.with(plugin_key, *text);
  const ModelEntry& entry = r.model(flags.preset);
  const ModelHandle model = r.create(flags.preset, o);
  int64_t params = 0;
  for (const auto& p : model.module->parameters()) params += p.numel();
  if (json) {
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

// The U-Net's arithmetic, and a DSN's parts when there is one.
// A registry model's count comes from the module its factory builds; the U-Net's from arithmetic.
int64_t parameter_count(const UNetOptions& o) {
  if (o.is_builtin()) return unet_parameter_count(o);
  int64_t n = 0;
  for (const auto& p : UNet(o)->parameters()) n += p.numel();
  return n;
}

void print_model(const std::string& name, const UNetOptions& o, const std::optional<DsnOptions>& dsn, bool json,
                 const CheckpointMeta* meta = nullptr) {
  const int64_t params = parameter_count(o);
  nlohmann::json j = o;  // the checkpoint's spelling of the options (model_json.hpp)
  if (meta) {  // what inference repeats: the checkpoint's spelling (checkpoint.hpp)
    const nlohmann::json m = *meta;
    j["normalization"] = m.at("normalization");
    if (m.contains("resampling")) j["resampling"] = m.at("resampling");
  }
  j.update(nlohmann::json{{"model", name},
                          {"params", params},
                          {"layers", unet_layer_count(o)},
                          {"halo", unet_halo(o)},
                          {"remainder", unet_remainder(o)},
                          {"alignment", unet_alignment(o)},
                          {"receptive_field", unet_receptive_field(o)},
                          {"flops_per_output_pixel", unet_flops_per_output_pixel(o)}});
  int64_t priv = 0, recon = 0, classifier = 0;
  if (dsn) {
    priv = dsn_private_parameter_count(o, *dsn);
    recon = dsn_recon_parameter_count(o, *dsn);
    classifier = dsn_classifier_parameter_count(o, *dsn);
    nlohmann::json options;
    options_to_json(options, *dsn);
    j["dsn"] = {{"domains", dsn->domains},
                {"options", options},
                {"code_channels", dsn_code_channels(o)},
                {"private_encoder_params", priv},
                {"reconstruction_decoder_params", recon},
                {"domain_classifier_params", classifier},
                {"total_params", unet_parameter_count(o) + dsn->domains * priv + recon + classifier},
                {"params_per_rank_one_domain", unet_parameter_count(o) + priv + recon + classifier}};
  }
  if (json) {
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::printf("%s: %d-D %s, L=%d, n_c=%d, f=%d, %s padding, %s norm, %s decoder\n", name.c_str(), o.dims,
              o.is_builtin() ? "U-Net" : o.name.c_str(), o.levels, o.convs_per_level, o.base_filters,
              to_string(o.padding).c_str(), to_string(o.norm).c_str(), to_string(o.decoder).c_str());
  std::printf("  parameters              %lld (%.1f MiB as float32)\n", (long long)params, params * 4.0 / (1 << 20));
  if (meta) {
    std::printf("  normalisation           %s\n", io::describe(meta->norm).c_str());
    std::printf("  resampling              %s\n", describe(meta->resampling).c_str());
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
  if (!dsn) return;
  const int64_t unet = unet_parameter_count(o);
  std::printf("Domain Separation Network: 1 source + %d target%s, %s similarity (alpha %g, beta %g, gamma %g)\n",
              dsn->domains - 1, dsn->domains > 2 ? "s" : "", to_string(dsn->similarity).c_str(), dsn->alpha, dsn->beta,
              dsn->gamma);
  std::printf("  shared encoder + task decoder + head   the U-Net above (%lld); code %lld channels\n", (long long)unet,
              (long long)dsn_code_channels(o));
  std::printf("  private encoder (each domain)          %lld (p = %d)\n", (long long)priv, dsn->private_filters);
  std::printf("  shared reconstruction decoder          %lld (r = %d)\n", (long long)recon, dsn->recon_filters);
  std::printf("  domain classifier                      %lld (hidden %d)\n", (long long)classifier, dsn->classifier_hidden);
  std::printf("  whole DSN                              %lld (%.1f MiB); one rank per domain holds %lld\n",
              (long long)(unet + dsn->domains * priv + recon + classifier),
              (unet + dsn->domains * priv + recon + classifier) * 4.0 / (1 << 20), (long long)(unet + priv + recon + classifier));
  std::printf("  inference (any domain)                 the U-Net alone\n");
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
  print_model(c.model.preset + " (" + path + ")", c.model.options, dsn, json);
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

void register_model_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("model-info", "Parameters, layers, halo, receptive field and FLOPs of a U-Net");
  static ModelFlags flags;
  static bool json = false;
  static bool list = false;
  flags.add_to(cmd);
  cmd->add_flag("--json", json, "Print JSON");
  cmd->add_flag("--list", list, "List the registered architectures, losses and post-processors, plugins included");
  static std::string config, checkpoint;
  cmd->add_option("--config", config, "The model of a `tessera train` config (a DSN's parts with model.kind dsn)");
  cmd->add_option("--checkpoint", checkpoint, "The model a checkpoint holds (a DSN's parts too)");
  cmd->callback([] {
    if (list) return print_list(json);
    if (!config.empty()) return print_config_model(config, json);
    if (!checkpoint.empty()) return print_checkpoint_model(checkpoint, json);
    if (!is_unet_preset(flags.preset)) return print_plugin_model(flags, json);
    print_model(flags.preset, flags.resolve(), std::nullopt, json);
  });
}

}  // namespace tessera::cli
