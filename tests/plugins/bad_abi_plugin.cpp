// A plugin built against another plugin ABI (one newer than this tessera's): the host must
// refuse it after asking its version and before calling anything else. Its init aborts the
// process, so a host that called it would fail the test run loudly.
#include <cstdio>
#include <cstdlib>

#include "tessera/plugin.hpp"

uint32_t tessera_plugin_abi_version(void) { return TESSERA_PLUGIN_ABI_VERSION + 1; }

int tessera_plugin_init(tessera::PluginRegistrar*) {
  std::fprintf(stderr, "bad_abi plugin: tessera_plugin_init called despite the ABI mismatch\n");
  std::abort();
}
