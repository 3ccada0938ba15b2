#pragma once
// The Tessera plugin API: everything a plugin may see, and everything the host and a plugin
// must agree on.
//
// A plugin is a shared library (CMake MODULE) that exports exactly two C symbols:
//
//   uint32_t tessera_plugin_abi_version(void);          // return TESSERA_PLUGIN_ABI_VERSION
//   int tessera_plugin_init(tessera::PluginRegistrar*);  // register; 0 on success
//
// The host dlopen()s the library, calls tessera_plugin_abi_version() first and refuses the
// plugin, without calling anything else in it, unless the number equals its own
// TESSERA_PLUGIN_ABI_VERSION. Only then does it call tessera_plugin_init(), which registers
// models, losses and post-processors through the registrar. A plugin's registrations are
// accepted all together or not at all (a name already taken refuses the whole plugin).
//
// The entry points have C names so they can be found with dlsym, but what crosses them is C++:
// std::function, std::string and LibTorch modules. A plugin must therefore be built with the
// same compiler family, C++ standard library and LibTorch as the host. The ABI version guards
// the layout of every type in this header: any change to them bumps it.
//
// Lifetime: the host never unloads a plugin it accepted, so factories and the modules they
// build may point into plugin code for the life of the process.
//
// Tensor layout: models take N × in_channels × spatial... (NCL, NCHW or NCDHW, float) and
// return per-pixel logits N × classes × spatial...; losses take those logits and int64
// targets N × spatial...; post-processors take logits and return a tensor of the same
// spatial size.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <torch/nn/module.h>
#include <torch/types.h>

#define TESSERA_PLUGIN_ABI_VERSION 3

#define TESSERA_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace tessera {

/// The small option set every model factory receives. The common fields are optional so that
/// each model (or preset) supplies its own defaults for what the caller leaves out; anything
/// else travels as text in `extra` ("convs" → "3") and is read with get_int / get_string.
/// Factories reject what they do not understand (expect_only) so that a misspelt key is an
/// error, not a silent default. Errors are std::invalid_argument naming the field; the
/// registry prefixes the model name.
struct ModelOptions {
  std::optional<int> dims;         ///< spatial dimensions (1, 2 or 3)
  std::optional<int> in_channels;  ///< input channels / bands
  std::optional<int> classes;      ///< output classes (logits)
  std::optional<int> filters;      ///< filters of the first level
  std::optional<int> levels;       ///< resolution levels (or layers, for flat networks)
  std::map<std::string, std::string> extra;  ///< model-specific key/values

  ModelOptions& with_dims(int v) { dims = v; return *this; }
  ModelOptions& with_in_channels(int v) { in_channels = v; return *this; }
  ModelOptions& with_classes(int v) { classes = v; return *this; }
  ModelOptions& with_filters(int v) { filters = v; return *this; }
  ModelOptions& with_levels(int v) { levels = v; return *this; }
  ModelOptions& with(const std::string& key, const std::string& value) {
    extra[key] = value;
    return *this;
  }

  /// Throws std::invalid_argument naming the first given field that is not positive.
  void validate() const {
    const std::pair<const char*, const std::optional<int>*> fields[] = {
        {"dims", &dims}, {"in_channels", &in_channels}, {"classes", &classes},
        {"filters", &filters}, {"levels", &levels}};
    for (const auto& [name, value] : fields)
      if (*value && **value < 1)
        throw std::invalid_argument(std::string(name) + " must be positive, got " + std::to_string(**value));
  }

  /// The integer value of extra[key], or `fallback` when absent; throws naming the key when
  /// the text is not an integer.
  int get_int(const std::string& key, int fallback) const {
    const auto it = extra.find(key);
    if (it == extra.end()) return fallback;
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != it->second.size())
      throw std::invalid_argument(key + " must be an integer, got '" + it->second + "'");
    return v;
  }
  std::string get_string(const std::string& key, const std::string& fallback) const {
    const auto it = extra.find(key);
    return it == extra.end() ? fallback : it->second;
  }
  /// Throws naming the first extra key that is not in `known`.
  void expect_only(std::initializer_list<const char*> known) const {
    for (const auto& [key, value] : extra) {
      bool found = false;
      for (const char* k : known) found = found || key == k;
      if (!found) {
        std::string list;
        for (const char* k : known) list += std::string(list.empty() ? "" : ", ") + k;
        throw std::invalid_argument("unknown option '" + key + "' (known: " + (list.empty() ? "none" : list) + ")");
      }
    }
  }
};

/// How a model built from core/blocks presents its layer sequence, so the host can cut it into
/// pipeline stages (`tessera train --pp`). Declaring one says: the module is core's U-Net shape
/// (tessera/core/layer_sequence.hpp) for the options it was built from — modules named as the
/// built-in U-Net's (enc<ℓ>.conv<i>, enc<ℓ>.norm<i>, up<ℓ>, dec<ℓ>.…, head), 3^D `same`
/// convolutions (ConvNd), NormNd norms, transposed 2^D up-sampling, a 1×1 head, 2^D max pooling,
/// ReLU after every norm — and, when `block_tail` is not empty, every convolution block's
/// submodule of that name (enc0.se) is a BlockTail (unet_blocks.hpp) run after the block's last
/// activation. The host checks the declaration against the module (every parameter in some
/// declared layer, of the shape a stage builds) and refuses a model whose layers it does not
/// cover. A model whose forward is anything else (a layer a stage cannot hold, a dropout, a
/// different wiring) declares none, and `--pp` refuses it naming the model. Since ABI 3.
struct LayerLayout {
  std::string block_tail;  ///< submodule name of each block's tail ("se"), or empty
};

/// A built model: the module (parameters, buffers, train/eval, save/load) and its forward.
/// `forward` may only be called while `module` is alive; the handle keeps it so. A forward
/// that is given the wrong rank, channels or spatial sides throws std::invalid_argument
/// saying so (the registry turns it into tessera::Error naming the model).
struct ModelHandle {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  /// Its layer sequence, when the model presents one (LayerLayout); since ABI 3.
  std::optional<LayerLayout> layers;
};

/// Builds a model from options; throws std::invalid_argument naming a bad option.
using ModelFactory = std::function<ModelHandle(const ModelOptions&)>;
/// Scalar loss from logits (N, classes, spatial...) and int64 targets (N, spatial...).
using LossFunction = std::function<torch::Tensor(const torch::Tensor& logits, const torch::Tensor& target)>;
/// Turns logits (N, classes, spatial...) into the output written to disk (labels, scores...).
using PostProcessor = std::function<torch::Tensor(const torch::Tensor& logits)>;

struct ModelEntry {
  std::string name;         ///< unique across built-ins and plugins, e.g. "se-unet"
  std::string description;  ///< one line for `tessera model-info --list`
  ModelFactory factory;
  std::string origin;       ///< filled in by the host: "built-in" or the plugin's path
  /// What the factory uses for the options a caller leaves out (dims, in_channels, classes,
  /// filters, levels and, in `extra`, "convs" and "norm"): the host starts `train` and `infer`
  /// configurations from these, so they must be the factory's own defaults. Since ABI 2.
  ModelOptions defaults;
};

struct LossEntry {
  std::string name;
  std::string description;
  LossFunction loss;
  std::string origin;
};

struct PostProcessorEntry {
  std::string name;
  std::string description;
  PostProcessor process;
  std::string origin;
};

/// What tessera_plugin_init receives. The host owns it; it is valid only during the call.
/// Registrations are checked (unique, non-empty name, callable set) when the call returns.
class PluginRegistrar {
 public:
  virtual ~PluginRegistrar() = default;
  virtual void add_model(ModelEntry entry) = 0;
  virtual void add_loss(LossEntry entry) = 0;
  virtual void add_post_processor(PostProcessorEntry entry) = 0;
};

}  // namespace tessera

/// The ABI version the plugin was built against; must return TESSERA_PLUGIN_ABI_VERSION.
TESSERA_PLUGIN_EXPORT uint32_t tessera_plugin_abi_version(void);
/// Registers the plugin's contents; returns 0 on success, anything else refuses the plugin.
TESSERA_PLUGIN_EXPORT int tessera_plugin_init(tessera::PluginRegistrar* registrar);
