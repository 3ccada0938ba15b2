#pragma once
// Loads plugins (plugins/include/tessera/plugin.hpp) into a ModelRegistry.
//
// A plugin is checked before it may run any of its own code beyond its static initialisers:
// its exported tessera_plugin_abi_version() must equal TESSERA_PLUGIN_ABI_VERSION, otherwise
// it is unloaded and refused with "PATH: plugin ABI version N, this tessera expects M".
// Then tessera_plugin_init() registers into a staging area; the registrations enter the
// registry only if every name is new (all or nothing). An accepted plugin stays loaded for
// the life of the process (its code backs the registry's factories).
//
// Search path, in order: each directory of TESSERA_PLUGIN_PATH (colon-separated), then
// <directory of the running executable>/../lib/tessera/plugins (an install tree or the build
// tree), then <install prefix>/lib/tessera/plugins. Directories that do not exist are
// skipped; a file name already found in an earlier directory is shadowed, as with PATH.
// Not thread safe: load plugins once, at start-up, before sharing the registry.
#include <string>
#include <vector>

namespace tessera {

class ModelRegistry;

/// What one accepted plugin added.
struct LoadedPlugin {
  std::string path;  ///< canonical path of the shared library
  std::vector<std::string> models, losses, post_processors;
};

/// The outcome of searching directories: what loaded, and one line per refused file.
struct PluginDiscovery {
  std::vector<LoadedPlugin> loaded;
  std::vector<std::string> errors;
};

/// Loads one plugin file. Throws tessera::Error, one line naming `path`: no such file, not
/// loadable (the dlerror text), not a Tessera plugin, wrong ABI version, init failed, a name
/// already registered, or the same file already loaded into this registry.
LoadedPlugin load_plugin(ModelRegistry& registry, const std::string& path);

/// The directories searched by default (see above), existing or not, without duplicates.
std::vector<std::string> plugin_search_path();

/// Loads every `*.so` in each directory (in name order within a directory). A refused
/// plugin does not stop the others: its message lands in `errors`.
PluginDiscovery load_plugins(ModelRegistry& registry, const std::vector<std::string>& directories);
PluginDiscovery load_plugins(ModelRegistry& registry);  ///< over plugin_search_path()

}  // namespace tessera
