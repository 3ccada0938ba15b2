#pragma once
// ModelRegistry names the architectures, losses and post-processors a run may use: the
// built-in U-Net family ("unet" and its presets, the losses of losses.hpp, "argmax") plus
// whatever plugins add (plugin_loader.hpp). A model name (likewise a loss or post-processor
// name) is unique across all origins; a second registration of a name is refused, never
// silently replaces the first.
//
// Models are built from ModelOptions (plugins/include/tessera/plugin.hpp); the result is a
// ModelHandle: the LibTorch module and its forward, logits N × classes × spatial.
// Not thread safe for registration; lookups and create() may run concurrently once
// registration is over.
#include <string>
#include <vector>

#include "tessera/plugin.hpp"

namespace tessera {

struct UNetOptions;

class ModelRegistry {
 public:
  /// With the built-ins registered.
  ModelRegistry();

  /// Throw tessera::Error when the name is empty, already taken (naming both origins) or the
  /// callable is empty. An empty origin is recorded as "built-in".
  void add_model(ModelEntry entry);
  void add_loss(LossEntry entry);
  void add_post_processor(PostProcessorEntry entry);

  bool has_model(const std::string& name) const;
  bool has_loss(const std::string& name) const;
  bool has_post_processor(const std::string& name) const;

  /// Throw tessera::Error listing the known names when `name` is unknown.
  const ModelEntry& model(const std::string& name) const;
  const LossEntry& loss(const std::string& name) const;
  const PostProcessorEntry& post_processor(const std::string& name) const;

  /// Validates the options and builds the model; a factory's complaint comes back as
  /// tessera::Error "model NAME: ...".
  ModelHandle create(const std::string& name, const ModelOptions& options) const;

  /// In registration order: built-ins first, then plugins in the order they were loaded.
  const std::vector<ModelEntry>& models() const { return models_; }
  const std::vector<LossEntry>& losses() const { return losses_; }
  const std::vector<PostProcessorEntry>& post_processors() const { return post_processors_; }
  std::vector<std::string> model_names() const;

 private:
  std::vector<ModelEntry> models_;
  std::vector<LossEntry> losses_;
  std::vector<PostProcessorEntry> post_processors_;
};

/// The process's registry: the built-ins and the plugins load_plugins() finds on the default
/// search path, loaded on first use (refused plugin files are reported once on stderr).
/// Thread safe after its first call returns.
const ModelRegistry& model_registry();

/// The starting options of a model name, for `model: {preset: NAME}`, `--model NAME`: a
/// U-Net preset (name "unet"), or a registry model's defaults (ModelEntry::defaults) with its
/// name set and `same` padding. Throws tessera::Error listing the names when unknown.
UNetOptions model_preset(const std::string& name);
/// The preset names and then the registry models that are not U-Net presets ("se-unet").
std::vector<std::string> model_preset_names();

/// The ModelOptions a registry model (options.name) is built from: dims, in_channels,
/// classes, filters, levels, and extra "convs" and "norm".
ModelOptions registry_model_options(const UNetOptions& options);

/// The UNetOptions the built-in "unet" (base: the UNetOptions defaults) or a preset such as
/// "unet-small" builds for `options`: dims, in_channels, classes, filters, levels override the
/// base; extra keys convs, kernel, padding, norm, decoder override the rest.
/// Throws tessera::Error naming a bad field.
UNetOptions unet_options_from(const std::string& base, const ModelOptions& options);

}  // namespace tessera
