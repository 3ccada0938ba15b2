// Plugin "se-unet": a 3-D (or 2-D) U-Net with a Squeeze-and-Excitation block after every
// convolution block, as in AnatomyNet (Zhu et al., 2019) and LAMP (Zhu et al., 2020).
//
// Level ℓ has `convs` × (3^D conv → norm → ReLU) with filters·2^ℓ channels, then SE (reduction
// r); 2^D max pooling between levels; the decoder goes up with a transposed 2^D convolution,
// concatenates the encoder output of its level and applies another convolution block + SE;
// a 1×1×1 head gives the logits. `same` padding throughout, so output spatial = input
// spatial, which must be a multiple of 2^(levels−1).
// Parameter names: enc<ℓ>.conv<i>.weight, enc<ℓ>.se.fc1.weight, up<ℓ>.weight, dec<ℓ>.*, head.*.
// It presents its layer sequence (LayerLayout, tail "se"), so `--pp` cuts it into stages.
#include <torch/torch.h>

#include "layers.hpp"
#include "tessera/plugin.hpp"

namespace tessera::plugins {
namespace {

struct SeUNetOptions {
  int dims = 3, in_channels = 1, classes = 2, filters = 16, levels = 4, convs = 2, reduction = 4;
  Norm norm = Norm::kInstance;
};

class SeUNetImpl : public torch::nn::Module {
 public:
  explicit SeUNetImpl(const SeUNetOptions& o) : o_(o) {
    auto width = [&](int l) { return int64_t{o.filters} << l; };
    for (int l = 0; l < o.levels; ++l)
      encoder_.push_back(register_module(
          "enc" + std::to_string(l),
          SeConvBlock(o.dims, l == 0 ? o.in_channels : width(l - 1), width(l), o.convs, o.norm, o.reduction)));
    for (int l = 0; l < o.levels - 1; ++l) {
      up_.push_back(register_module("up" + std::to_string(l), transposed_up(o.dims, width(l + 1), width(l))));
      decoder_.push_back(register_module("dec" + std::to_string(l),
                                         SeConvBlock(o.dims, 2 * width(l), width(l), o.convs, o.norm, o.reduction)));
    }
    head_ = register_module("head", same_conv(o.dims, width(0), o.classes, 1));
  }

  torch::Tensor forward(torch::Tensor x) {
    check_input(x, o_.dims, o_.in_channels, int64_t{1} << (o_.levels - 1), "se-unet");
    std::vector<torch::Tensor> skips;
    for (int l = 0; l < o_.levels; ++l) {
      x = encoder_[l]->forward(x);
      if (l < o_.levels - 1) {
        skips.push_back(x);
        x = max_pool2x(x);
      }
    }
    for (int l = o_.levels - 2; l >= 0; --l)
      x = decoder_[l]->forward(torch::cat({skips[l], up_[l]->forward(x)}, 1));
    return head_->forward(x);
  }

 private:
  SeUNetOptions o_;
  std::vector<SeConvBlock> encoder_, decoder_;
  std::vector<ConvNd> up_;
  ConvNd head_{nullptr};
};
TORCH_MODULE(SeUNet);

// The factory's defaults as the host sees them (ModelEntry::defaults).
ModelOptions se_unet_defaults() {
  const SeUNetOptions o;
  return unet_like_defaults(o.dims, o.in_channels, o.classes, o.filters, o.levels, o.convs, "instance");
}

ModelHandle make_se_unet(const ModelOptions& m) {
  m.expect_only({"convs", "reduction", "norm"});
  SeUNetOptions o;
  read_unet_like(m, o);
  o.reduction = m.get_int("reduction", o.reduction);
  o.norm = parse_norm_kind(m.get_string("norm", "instance"));
  if (o.dims != 2 && o.dims != 3) throw std::invalid_argument("dims must be 2 or 3, got " + std::to_string(o.dims));
  if (o.classes < 2) throw std::invalid_argument("classes must be >= 2, got " + std::to_string(o.classes));
  if (o.levels > 8) throw std::invalid_argument("levels must be in 1..8, got " + std::to_string(o.levels));
  if (o.convs < 1) throw std::invalid_argument("convs must be >= 1, got " + std::to_string(o.convs));
  if (o.reduction < 1) throw std::invalid_argument("reduction must be >= 1, got " + std::to_string(o.reduction));
  SeUNet net(o);
  SeUNetImpl* raw = net.get();
  // Core's U-Net shape with an SE tail after every block: the host can cut it into stages.
  return {net.ptr(), [raw](const torch::Tensor& x) { return raw->forward(x); }, LayerLayout{"se"}};
}

}  // namespace
}  // namespace tessera::plugins

uint32_t tessera_plugin_abi_version(void) { return TESSERA_PLUGIN_ABI_VERSION; }

int tessera_plugin_init(tessera::PluginRegistrar* registrar) {
  registrar->add_model({"se-unet",
                        "3-D Squeeze-and-Excitation U-Net (AnatomyNet/LAMP), same padding; dims 3 (or 2), "
                        "options convs, reduction, norm=instance|group|none",
                        tessera::plugins::make_se_unet,
                        {},
                        tessera::plugins::se_unet_defaults()});
  return 0;
}
