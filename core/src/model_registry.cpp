#include "tessera/core/model_registry.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/losses.hpp"
#include "tessera/core/plugin_loader.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/core/unet_spec.hpp"

namespace tessera {

namespace {

constexpr const char* kBuiltIn = "built-in";

template <class Entry>
const Entry* find(const std::vector<Entry>& entries, const std::string& name) {
  for (const auto& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

template <class Entry>
void add(std::vector<Entry>& entries, Entry entry, const char* kind, bool callable) {
  if (entry.origin.empty()) entry.origin = kBuiltIn;
  if (entry.name.empty()) throw Error(entry.origin + ": a " + kind + " without a name");
  if (!callable) throw Error(entry.origin + ": " + kind + " '" + entry.name + "' has no function");
  if (const Entry* old = find(entries, entry.name))
    throw Error(entry.origin + ": " + kind + " '" + entry.name + "' is already registered (" + old->origin + ")");
  entries.push_back(std::move(entry));
}

template <class Entry>
const Entry& lookup(const std::vector<Entry>& entries, const std::string& name, const char* kind) {
  if (const Entry* e = find(entries, name)) return *e;
  std::string names;
  for (const auto& e : entries) names += (names.empty() ? "" : ", ") + e.name;
  throw Error(std::string(kind) + ": unknown name '" + name + "' (known: " + names + ")");
}

ModelHandle unet_handle(const UNetOptions& o) {
  UNet net(o);
  UNetImpl* raw = net.get();
  return {net.ptr(), [raw](const torch::Tensor& x) { return raw->forward(x); }, std::nullopt};
}

std::string unet_description(const std::string& preset) {
  const UNetOptions o = unet_preset(preset);
  return std::to_string(o.dims) + "-D U-Net preset: L=" + std::to_string(o.levels) +
         ", n_c=" + std::to_string(o.convs_per_level) + ", f=" + std::to_string(o.base_filters);
}

}  // namespace

UNetOptions unet_options_from(const std::string& base, const ModelOptions& options) {
  UNetOptions o = base == "unet" ? UNetOptions{} : unet_preset(base);
  try {
    options.validate();
    options.expect_only({"convs", "kernel", "padding", "norm", "decoder"});
    if (options.dims) o.dims = *options.dims;
    if (options.in_channels) o.in_channels = *options.in_channels;
    if (options.classes) o.classes = *options.classes;
    if (options.filters) o.base_filters = *options.filters;
    if (options.levels) o.levels = *options.levels;
    o.convs_per_level = options.get_int("convs", o.convs_per_level);
    o.kernel = options.get_int("kernel", o.kernel);
  } catch (const std::invalid_argument& e) {
    throw Error("model " + base + ": " + e.what());
  }
  if (auto it = options.extra.find("padding"); it != options.extra.end()) o.padding = parse_padding(it->second);
  if (auto it = options.extra.find("norm"); it != options.extra.end()) o.norm = parse_norm(it->second);
  if (auto it = options.extra.find("decoder"); it != options.extra.end()) o.decoder = parse_decoder(it->second);
  o.validate();
  return o;
}

ModelRegistry::ModelRegistry() {
  add_model({"unet", "U-Net (Ronneberger et al.), 2-D or 3-D; options convs, kernel, padding, norm, decoder",
             [](const ModelOptions& o) { return unet_handle(unet_options_from("unet", o)); }, kBuiltIn});
  for (const auto& preset : unet_preset_names())
    add_model({preset, unet_description(preset),
               [preset](const ModelOptions& o) { return unet_handle(unet_options_from(preset, o)); }, kBuiltIn});

  // The losses of losses.hpp under the names the run configuration uses (loss.kind).
  const std::pair<LossKind, const char*> kinds[] = {
      {LossKind::kCrossEntropy, "cross-entropy"},
      {LossKind::kDice, "1 - mean soft Dice over classes"},
      {LossKind::kDiceCrossEntropy, "cross-entropy + soft Dice"},
      {LossKind::kFocal, "focal loss, gamma 2"},
      {LossKind::kAdaptiveDiceFocal, "soft Dice + class-balanced focal (AnatomyNet)"}};
  for (const auto& [kind, description] : kinds) {
    const LossOptions options = LossOptions{}.with_kind(kind);
    add_loss({loss_kind_name(kind), std::string(description) + " (losses.hpp defaults)",
              [options](const torch::Tensor& logits, const torch::Tensor& target) {
                return segmentation_loss(logits, target, options);
              },
              kBuiltIn});
  }
  add_post_processor({"argmax", "class label per pixel (int64, N × spatial)",
                      [](const torch::Tensor& logits) { return logits.argmax(1); }, kBuiltIn});
}

void ModelRegistry::add_model(ModelEntry entry) {
  const bool callable = static_cast<bool>(entry.factory);
  add(models_, std::move(entry), "model", callable);
}

void ModelRegistry::add_loss(LossEntry entry) {
  const bool callable = static_cast<bool>(entry.loss);
  add(losses_, std::move(entry), "loss", callable);
}

void ModelRegistry::add_post_processor(PostProcessorEntry entry) {
  const bool callable = static_cast<bool>(entry.process);
  add(post_processors_, std::move(entry), "post-processor", callable);
}

bool ModelRegistry::has_model(const std::string& name) const { return find(models_, name) != nullptr; }
bool ModelRegistry::has_loss(const std::string& name) const { return find(losses_, name) != nullptr; }
bool ModelRegistry::has_post_processor(const std::string& name) const {
  return find(post_processors_, name) != nullptr;
}

const ModelEntry& ModelRegistry::model(const std::string& name) const { return lookup(models_, name, "model"); }
const LossEntry& ModelRegistry::loss(const std::string& name) const { return lookup(losses_, name, "loss"); }
const PostProcessorEntry& ModelRegistry::post_processor(const std::string& name) const {
  return lookup(post_processors_, name, "post-processor");
}

ModelHandle ModelRegistry::create(const std::string& name, const ModelOptions& options) const {
  const ModelEntry& entry = model(name);
  ModelHandle handle;
  try {
    options.validate();
    handle = entry.factory(options);
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw Error("model " + name + " (" + entry.origin + "): " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw Error("model " + name + " (" + entry.origin + "): " + e.what());
  }
  if (!handle.module || !handle.forward)
    throw Error("model " + name + " (" + entry.origin + "): the factory returned no module or no forward");
  // A plugin's forward reports a bad input (wrong rank, channels, side) as
  // std::invalid_argument; callers see tessera::Error naming the model.
  handle.forward = [name, forward = std::move(handle.forward)](const torch::Tensor& x) {
    try {
      return forward(x);
    } catch (const std::invalid_argument& e) {
      throw Error("model " + name + ": " + e.what());
    }
  };
  return handle;
}

std::vector<std::string> ModelRegistry::model_names() const {
  std::vector<std::string> names;
  for (const auto& e : models_) names.push_back(e.name);
  return names;
}

const ModelRegistry& model_registry() {
  static const ModelRegistry registry = [] {
    ModelRegistry r;
    for (const auto& error : load_plugins(r).errors) std::fprintf(stderr, "tessera: warning: %s\n", error.c_str());
    return r;
  }();
  return registry;
}

UNetOptions model_preset(const std::string& name) {
  const std::vector<std::string> presets = unet_preset_names();
  if (std::find(presets.begin(), presets.end(), name) != presets.end()) return unet_preset(name);
  const ModelRegistry& registry = model_registry();
  if (name == "unet" || !registry.has_model(name)) {
    std::string names;
    for (const auto& n : model_preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("unknown model '" + name + "' (known: " + names + ")");
  }
  const ModelOptions& d = registry.model(name).defaults;
  UNetOptions o;
  o.name = name;
  o.padding = Padding::kSame;
  o.dims = d.dims.value_or(o.dims);
  o.in_channels = d.in_channels.value_or(o.in_channels);
  o.classes = d.classes.value_or(o.classes);
  o.base_filters = d.filters.value_or(o.base_filters);
  o.levels = d.levels.value_or(o.levels);
  try {
    o.convs_per_level = d.get_int("convs", o.convs_per_level);
  } catch (const std::invalid_argument& e) {
    throw Error("model " + name + ": its default " + e.what());
  }
  if (auto it = d.extra.find("norm"); it != d.extra.end()) o.norm = parse_norm(it->second);
  return o;  // validated once the caller's overrides are in (a seed model defaults to 1 class)
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names = unet_preset_names();
  for (const auto& e : model_registry().models())
    if (e.name != "unet" && std::find(names.begin(), names.end(), e.name) == names.end()) names.push_back(e.name);
  return names;
}

ModelOptions registry_model_options(const UNetOptions& o) {
  ModelOptions m = ModelOptions{}
                       .with_dims(o.dims)
                       .with_in_channels(o.in_channels)
                       .with_classes(o.classes)
                       .with_filters(o.base_filters)
                       .with_levels(o.levels)
                       .with("convs", std::to_string(o.convs_per_level))
                       .with("norm", to_string(o.norm));
  // Passed only when asked for, so a factory that does not know the key refuses it by name.
  if (o.decoder != Decoder::kTransposed) m.with("decoder", to_string(o.decoder));
  return m;
}

}  // namespace tessera
