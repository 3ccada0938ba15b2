// A test plugin filling the loss and post-processor slots:
//   loss "test-mean-square": mean over pixels and classes of (softmax(logits) − one-hot)²
//   post-processor "test-foreground": 1 − softmax(logits)[:, 0], the probability of "not
//   class 0", shape N × spatial.
#include <torch/torch.h>

#include "tessera/plugin.hpp"

uint32_t tessera_plugin_abi_version(void) { return TESSERA_PLUGIN_ABI_VERSION; }

int tessera_plugin_init(tessera::PluginRegistrar* registrar) {
  registrar->add_loss({"test-mean-square", "Brier score: mean (softmax - one-hot)^2",
                       [](const torch::Tensor& logits, const torch::Tensor& target) {
                         const auto p = torch::softmax(logits, 1);
                         const auto onehot = torch::one_hot(target, logits.size(1)).movedim(-1, 1).to(p.dtype());
                         return (p - onehot).pow(2).mean();
                       },
                       {}});
  registrar->add_post_processor({"test-foreground", "probability of any class but 0",
                                 [](const torch::Tensor& logits) { return 1 - torch::softmax(logits, 1).select(1, 0); },
                                 {}});
  return 0;
}
