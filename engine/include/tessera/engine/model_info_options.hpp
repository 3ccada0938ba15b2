#pragma once
// What `tessera model-info` is asked, declared once: fields() drives the command's flags,
// their help and validate(), whose messages name the flags. The model of --model PRESET comes
// as the preset's name and the text of each override flag given (--levels 4 → "levels": "4"):
// a U-Net preset is resolved from them, a registry model (a plugin's) is built from the same
// texts through the plugin API. Torch-free.
#include <map>
#include <string>

namespace tessera::engine {

struct ModelInfoOptions {
  std::string model_preset = "unet-tiny";               ///< --model (not a field: the model flags are their own)
  std::map<std::string, std::string> model_overrides;  ///< UNetOptions key → the text of its flag, as given
  bool json = false;
  bool list = false;        ///< the registered architectures, losses and post-processors instead
  std::string config;       ///< the model of a `tessera train` config instead
  std::string checkpoint;   ///< the model a checkpoint holds instead

  /// At most one of list, config, checkpoint; no model override beside them. Throws
  /// tessera::Error naming the flags.
  void validate() const;
};

template <class V>
void fields(ModelInfoOptions& o, V& v) {
  v.field("json", o.json, "Print JSON");
  v.field("list", o.list, "List the registered architectures, losses and post-processors, plugins included");
  v.field("config", o.config, "The model of a `tessera train` config (a DSN's parts with model.kind dsn)");
  v.field("checkpoint", o.checkpoint, "The model a checkpoint holds (a DSN's parts too)");
}

}  // namespace tessera::engine
