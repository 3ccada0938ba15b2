#include "tessera/core/plugin_loader.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <system_error>

#include "tessera/core/error.hpp"
#include "tessera/core/model_registry.hpp"
#include "tessera/plugin.hpp"
#include "tessera/plugin_install_dir.hpp"

namespace fs = std::filesystem;

namespace tessera {

namespace {

using AbiVersionFn = uint32_t (*)();
using InitFn = int (*)(PluginRegistrar*);

// Collects a plugin's registrations; nothing reaches the registry until all are checked.
class StagingRegistrar final : public PluginRegistrar {
 public:
  void add_model(ModelEntry e) override { models.push_back(std::move(e)); }
  void add_loss(LossEntry e) override { losses.push_back(std::move(e)); }
  void add_post_processor(PostProcessorEntry e) override { post_processors.push_back(std::move(e)); }

  std::vector<ModelEntry> models;
  std::vector<LossEntry> losses;
  std::vector<PostProcessorEntry> post_processors;
};

// Throws naming the first empty, repeated or already registered name, or missing callable.
template <class Entry, class Callable, class Taken>
void check_names(const std::string& path, const std::vector<Entry>& entries, const char* kind,
                 Callable callable, Taken taken, const ModelRegistry& registry) {
  std::set<std::string> seen;
  for (const auto& e : entries) {
    if (e.name.empty()) throw Error(path + ": registers a " + kind + " without a name");
    if (!callable(e)) throw Error(path + ": " + kind + " '" + e.name + "' has no function");
    if (!seen.insert(e.name).second) throw Error(path + ": registers " + kind + " '" + e.name + "' twice");
    if (const std::string* origin = taken(registry, e.name))
      throw Error(path + ": " + kind + " '" + e.name + "' is already registered (" + *origin + ")");
  }
}

// The origins of every accepted plugin: a second load of the same file is refused.
bool already_loaded(const ModelRegistry& registry, const std::string& canonical) {
  auto same = [&](const auto& entries) {
    return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.origin == canonical; });
  };
  return same(registry.models()) || same(registry.losses()) || same(registry.post_processors());
}

std::string executable_plugin_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return (exe.parent_path().parent_path() / "lib" / "tessera" / "plugins").string();
}

}  // namespace

LoadedPlugin load_plugin(ModelRegistry& registry, const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(path + ": no such plugin file");
  if (!fs::is_regular_file(path, ec)) throw Error(path + ": not a regular file");
  const std::string canonical = fs::canonical(path, ec).string();
  if (ec) throw Error(path + ": " + ec.message());
  if (already_loaded(registry, canonical)) throw Error(path + ": plugin already loaded");

  void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw Error(path + ": cannot load plugin: " + (why ? why : "unknown dlopen error"));
  }
  // Before init has run, nothing of the plugin is referenced and unloading is safe.
  auto refuse = [&](const std::string& why) {
    dlclose(handle);
    throw Error(path + ": " + why);
  };
  auto abi = reinterpret_cast<AbiVersionFn>(dlsym(handle, "tessera_plugin_abi_version"));
  if (!abi) refuse("not a Tessera plugin (it exports no tessera_plugin_abi_version)");
  const uint32_t version = abi();
  if (version != TESSERA_PLUGIN_ABI_VERSION)
    refuse("plugin ABI version " + std::to_string(version) + ", this tessera expects " +
           std::to_string(TESSERA_PLUGIN_ABI_VERSION) + " (rebuild the plugin against this tessera)");
  auto init = reinterpret_cast<InitFn>(dlsym(handle, "tessera_plugin_init"));
  if (!init) refuse("not a Tessera plugin (it exports no tessera_plugin_init)");

  // From here on the plugin's code may be referenced (its registrations, static state), so a
  // refused plugin stays mapped; the staging area is destroyed before we return.
  StagingRegistrar stage;
  int rc = 0;
  try {
    rc = init(&stage);
  } catch (const std::exception& e) {
    throw Error(path + ": tessera_plugin_init threw: " + e.what());
  } catch (...) {
    throw Error(path + ": tessera_plugin_init threw an unknown exception");
  }
  if (rc != 0) throw Error(path + ": tessera_plugin_init failed (returned " + std::to_string(rc) + ")");

  check_names(path, stage.models, "model", [](const ModelEntry& e) { return bool(e.factory); },
              [](const ModelRegistry& r, const std::string& n) { return r.has_model(n) ? &r.model(n).origin : nullptr; },
              registry);
  check_names(path, stage.losses, "loss", [](const LossEntry& e) { return bool(e.loss); },
              [](const ModelRegistry& r, const std::string& n) { return r.has_loss(n) ? &r.loss(n).origin : nullptr; },
              registry);
  check_names(path, stage.post_processors, "post-processor", [](const PostProcessorEntry& e) { return bool(e.process); },
              [](const ModelRegistry& r, const std::string& n) {
                return r.has_post_processor(n) ? &r.post_processor(n).origin : nullptr;
              },
              registry);

  LoadedPlugin loaded{canonical, {}, {}, {}};
  for (auto& e : stage.models) {
    loaded.models.push_back(e.name);
    e.origin = canonical;
    registry.add_model(std::move(e));
  }
  for (auto& e : stage.losses) {
    loaded.losses.push_back(e.name);
    e.origin = canonical;
    registry.add_loss(std::move(e));
  }
  for (auto& e : stage.post_processors) {
    loaded.post_processors.push_back(e.name);
    e.origin = canonical;
    registry.add_post_processor(std::move(e));
  }
  return loaded;
}

std::vector<std::string> plugin_search_path() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("TESSERA_PLUGIN_PATH")) {
    const std::string s = env;
    size_t start = 0;
    while (start <= s.size()) {
      const size_t colon = std::min(s.find(':', start), s.size());
      if (colon > start) dirs.push_back(s.substr(start, colon - start));
      start = colon + 1;
    }
  }
  if (auto exe_dir = executable_plugin_dir(); !exe_dir.empty()) dirs.push_back(exe_dir);
  dirs.push_back(TESSERA_PLUGIN_INSTALL_DIR);
  // The same directory reached twice (build tree == install prefix, a repeated entry) is
  // searched once.
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (const auto& d : dirs) {
    std::error_code ec;
    fs::path key = fs::weakly_canonical(d, ec);
    if (ec) key = fs::path(d).lexically_normal();
    if (seen.insert(key.string()).second) unique.push_back(d);
  }
  return unique;
}

PluginDiscovery load_plugins(ModelRegistry& registry, const std::vector<std::string>& directories) {
  PluginDiscovery result;
  std::set<std::string> seen_names;
  for (const auto& dir : directories) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().extension() == ".so" && !entry.is_directory()) files.push_back(entry.path());
    if (ec) {
      result.errors.push_back(dir + ": cannot list plugin directory: " + ec.message());
      continue;
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      if (!seen_names.insert(file.filename().string()).second) continue;  // shadowed
      try {
        result.loaded.push_back(load_plugin(registry, file.string()));
      } catch (const Error& e) {
        result.errors.push_back(e.what());
      }
    }
  }
  return result;
}

PluginDiscovery load_plugins(ModelRegistry& registry) { return load_plugins(registry, plugin_search_path()); }

}  // namespace tessera
