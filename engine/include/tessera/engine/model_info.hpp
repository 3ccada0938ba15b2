#pragma once
// `tessera model-info` as a library: size, halo and cost of a network — a U-Net preset with
// overrides, a training config's model or a checkpoint's (with a Domain Separation Network's
// parts, kind dsn), or a registry model (a plugin's: what the registry can tell) — or the list
// of every registered architecture, loss and post-processor, built-in or from a plugin
// (TESSERA_PLUGIN_PATH, <exe>/../lib/tessera/plugins, the prefix). Printed as text or JSON.
// Torch-free header.
#include "tessera/engine/model_info_options.hpp"

namespace tessera::engine {

/// The command: validate(), then the list or the model, printed. Refused plugin files are
/// warnings on stderr. Throws tessera::Error naming the flag or the file.
void print_model_info(const ModelInfoOptions& o);

}  // namespace tessera::engine
