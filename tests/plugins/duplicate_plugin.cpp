// A test plugin that registers two new names and one that is taken ("unet", a built-in):
// the host must refuse all three, not keep the first two.
#include <torch/torch.h>

#include "tessera/plugin.hpp"

uint32_t tessera_plugin_abi_version(void) { return TESSERA_PLUGIN_ABI_VERSION; }

int tessera_plugin_init(tessera::PluginRegistrar* registrar) {
  auto identity = [](const tessera::ModelOptions&) -> tessera::ModelHandle {
    auto m = std::make_shared<torch::nn::Module>();
    return {m, [](const torch::Tensor& x) { return x; }};
  };
  registrar->add_model({"duplicate-test-new-model", "identity", identity, {}});
  registrar->add_loss({"duplicate-test-new-loss", "zero",
                       [](const torch::Tensor& l, const torch::Tensor&) { return l.sum() * 0; }, {}});
  registrar->add_model({"unet", "a second unet", identity, {}});
  return 0;
}
