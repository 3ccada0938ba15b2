// Plugin "test networks": the four small networks used to validate decomposition (spatial
// and pipeline parallelism reproduce one device's result on them):
//
//   test-cnn1d, test-cnn2d, test-cnn3d  `levels` × (3^D same conv → norm → ReLU), 1×… head:
//                                       per-pixel logits, one code path over D = 1, 2, 3
//   test-fcn2d                          fully convolutional encoder (conv block, 2×2 max
//                                       pool) and decoder (transposed 2×2 up, sum with the
//                                       encoder features of that level — FCN-style skips —
//                                       conv block), 1×1 head
//
// Norm defaults to none: a norm layer takes statistics over the whole tile, which a spatial
// decomposition would have to reduce across ranks; the networks are meant to be local.
// Defaults: in_channels 1, classes 2, filters 8, levels 3 (CNN: conv layers; FCN:
// resolution levels, input sides a multiple of 2^(levels−1)).
#include <torch/torch.h>

#include "layers.hpp"
#include "tessera/plugin.hpp"

namespace tessera::plugins {
namespace {

struct TestNetOptions {
  int dims = 2, in_channels = 1, classes = 2, filters = 8, levels = 3;
  Norm norm = Norm::kNone;
};

TestNetOptions read_options(const ModelOptions& m, int dims) {
  m.expect_only({"norm"});
  if (m.dims && *m.dims != dims)
    throw std::invalid_argument("dims must be " + std::to_string(dims) + " for this network, got " +
                                std::to_string(*m.dims));
  TestNetOptions o;
  o.dims = dims;
  o.in_channels = m.in_channels.value_or(o.in_channels);
  o.classes = m.classes.value_or(o.classes);
  o.filters = m.filters.value_or(o.filters);
  o.levels = m.levels.value_or(o.levels);
  o.norm = parse_norm_kind(m.get_string("norm", "none"));
  if (o.classes < 2) throw std::invalid_argument("classes must be >= 2, got " + std::to_string(o.classes));
  if (o.levels > 8) throw std::invalid_argument("levels must be in 1..8, got " + std::to_string(o.levels));
  return o;
}

class TestCnnImpl : public torch::nn::Module {
 public:
  explicit TestCnnImpl(const TestNetOptions& o) : o_(o) {
    body_ = register_module("body", same_conv_block(o.dims, o.in_channels, o.filters, o.levels, o.norm));
    head_ = register_module("head", same_conv(o.dims, o.filters, o.classes, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    check_input(x, o_.dims, o_.in_channels, 1, "test-cnn");
    return head_->forward(body_->forward(x));
  }

 private:
  TestNetOptions o_;
  ConvBlock body_{nullptr};
  ConvNd head_{nullptr};
};
TORCH_MODULE(TestCnn);

class TestFcnImpl : public torch::nn::Module {
 public:
  explicit TestFcnImpl(const TestNetOptions& o) : o_(o) {
    auto width = [&](int l) { return int64_t{o.filters} << l; };
    for (int l = 0; l < o.levels; ++l)
      encoder_.push_back(register_module("enc" + std::to_string(l),
                                         same_conv_block(o.dims, l == 0 ? o.in_channels : width(l - 1), width(l),
                                                         1, o.norm)));
    for (int l = 0; l < o.levels - 1; ++l) {
      up_.push_back(register_module("up" + std::to_string(l), transposed_up(o.dims, width(l + 1), width(l))));
      decoder_.push_back(
          register_module("dec" + std::to_string(l), same_conv_block(o.dims, width(l), width(l), 1, o.norm)));
    }
    head_ = register_module("head", same_conv(o.dims, width(0), o.classes, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    check_input(x, o_.dims, o_.in_channels, int64_t{1} << (o_.levels - 1), "test-fcn2d");
    std::vector<torch::Tensor> skips;
    for (int l = 0; l < o_.levels; ++l) {
      x = encoder_[l]->forward(x);
      if (l < o_.levels - 1) {
        skips.push_back(x);
        x = max_pool2x(x);
      }
    }
    for (int l = o_.levels - 2; l >= 0; --l) x = decoder_[l]->forward(up_[l]->forward(x) + skips[l]);
    return head_->forward(x);
  }

 private:
  TestNetOptions o_;
  std::vector<ConvBlock> encoder_, decoder_;
  std::vector<ConvNd> up_;
  ConvNd head_{nullptr};
};
TORCH_MODULE(TestFcn);

template <class Net>
ModelFactory factory(int dims) {
  return [dims](const ModelOptions& m) -> ModelHandle {
    Net net(read_options(m, dims));
    auto* raw = net.get();
    return {net.ptr(), [raw](const torch::Tensor& x) { return raw->forward(x); }, std::nullopt};
  };
}

}  // namespace
}  // namespace tessera::plugins

uint32_t tessera_plugin_abi_version(void) { return TESSERA_PLUGIN_ABI_VERSION; }

int tessera_plugin_init(tessera::PluginRegistrar* registrar) {
  using namespace tessera::plugins;
  for (int dims = 1; dims <= 3; ++dims)
    registrar->add_model({"test-cnn" + std::to_string(dims) + "d",
                          "test network: " + std::to_string(dims) + "-D CNN, levels × (conv → norm → ReLU), same padding",
                          factory<TestCnn>(dims),
                          {}});
  registrar->add_model({"test-fcn2d", "test network: 2-D FCN, conv/pool encoder, transposed-conv decoder with summed skips",
                        factory<TestFcn>(2),
                        {}});
  return 0;
}
