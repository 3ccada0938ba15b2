// Plugin "seed U-Net": the benchmark U-Net family of the seed paper (Seal et al., ICPP 2020:
// Small, Medium-1, Medium-2, Large), which is torchgpipe's benchmark U-Net
// (kakaobrain/torchgpipe, benchmarks/models/unet, `unet(depth, num_convs, base_channels,
// input_channels, output_channels)`) layer for layer: the same convolutions, channels and
// parameter-free layers, hence the seed's trainable parameter counts (checked by
// tests/plugins/seed_unet_test.cpp).
//
// Depth d counts poolings: it is the seed's L and torchgpipe's `depth`. Tessera's `levels`
// counts resolutions (ModelOptions), so levels = d + 1: Small is levels 6. With F filters:
//   enc<ℓ>, ℓ < d      cell(in: C_in or F·2^(ℓ−1), out: F·2^ℓ), kept as skip ℓ, 2^D max pool
//   bottleneck         cell(in: F·2^(d−1), hidden: F·2^d, out: F·2^(d−1))
//   dec<ℓ>, ℓ = d−1…0  nearest 2× up-sampling, [up, skip ℓ] (F·2^(ℓ+1) channels), cell(out:
//                      F·2^(ℓ−1)): the decoder halves one level early, dec0 gives F/2
//   head               1^D convolution F/2 → classes, no bias
// A cell is n_c × (3^D convolution, `same` padding, no bias → channel dropout p = 0.1 →
// instance norm without affine parameters or running statistics → LeakyReLU 0.01); its first
// convolution maps in → hidden, its last hidden → out (one convolution: in → out). Only the
// convolutions have parameters, initialised as PyTorch initialises a convolution (Kaiming
// uniform, a = √5): enc<ℓ>.conv<i>.weight, bottleneck.conv<i>.weight, dec<ℓ>.conv<i>.weight,
// head.weight, registered in forward order.
//
// Input N × in_channels × H × W (or × D × H × W), float, each side at least 2^d; output N ×
// classes × the same sides. Sides that are not multiples of 2^d work as in torchgpipe:
// pooling floors and the up-sampled map is zero-padded at its end to its skip's size.
// Not decomposable: its norms see only their own block and its convolutions pad with zeros,
// so forward refuses to run under a spatial decomposition.
#include <cmath>

#include <torch/torch.h>

#include "layers.hpp"
#include "tessera/core/decomposition.hpp"
#include "tessera/plugin.hpp"

namespace tessera::plugins {
namespace {

// torchgpipe's conv_dropout_norm_relu: Dropout2d(p=0.1), InstanceNorm2d defaults, LeakyReLU(1e-2).
constexpr double kDropout = 0.1;
constexpr double kNormEpsilon = 1e-5;
constexpr double kLeakySlope = 1e-2;

/// What a seed U-Net is built from; the defaults are the seed's Small. validate() throws
/// std::invalid_argument naming the bad field.
struct SeedUNetOptions {
  int dims = 2;         ///< spatial dimensions: 2 (the seed's) or 3
  int in_channels = 4;  ///< torchgpipe input_channels (4 in the seed's table)
  int classes = 1;      ///< output_channels: the seed predicts one logit per pixel
  int filters = 64;     ///< base_channels: the first level's width F
  int levels = 6;       ///< resolutions = depth d + 1 (the seed's L + 1)
  int convs = 2;        ///< num_convs n_c per cell

  int depth() const { return levels - 1; }

  void validate() const {
    auto bad = [](const std::string& field, const std::string& why, int got) {
      throw std::invalid_argument(field + " must be " + why + ", got " + std::to_string(got));
    };
    if (dims != 2 && dims != 3) bad("dims", "2 or 3", dims);
    if (in_channels < 1) bad("in_channels", ">= 1", in_channels);
    if (classes < 1) bad("classes", ">= 1", classes);
    if (filters < 2) bad("filters", ">= 2 (the last decoder level has filters/2)", filters);
    if (levels < 2 || levels > 9) bad("levels", "in 2..9 (resolutions: the seed's L + 1)", levels);
    if (convs < 1) bad("convs", ">= 1", convs);
  }
};

/// A stride-1 K^D convolution without bias, `same` padding (K odd).
class BiasFreeConvImpl : public torch::nn::Module {
 public:
  BiasFreeConvImpl(int dims, int64_t in, int64_t out, int64_t kernel) : dims_(dims), padding_((kernel - 1) / 2) {
    std::vector<int64_t> shape{out, in};
    shape.insert(shape.end(), dims, kernel);
    weight_ = register_parameter("weight", torch::empty(shape));
    torch::NoGradGuard no_grad;
    torch::nn::init::kaiming_uniform_(weight_, std::sqrt(5.0));  // nn.ConvNd.reset_parameters
  }

  torch::Tensor forward(const torch::Tensor& x) {
    const std::vector<int64_t> one(dims_, 1), pad(dims_, padding_), zero(dims_, 0);
    return torch::convolution(x, weight_, /*bias=*/{}, one, pad, one, /*transposed=*/false, zero, /*groups=*/1);
  }

 private:
  int dims_;
  int64_t padding_;
  torch::Tensor weight_;
};
TORCH_MODULE(BiasFreeConv);

/// n_c × (conv → channel dropout → instance norm → LeakyReLU): torchgpipe's stacked_convs.
/// Submodules conv0 … conv<n_c − 1>.
class SeedCellImpl : public torch::nn::Module {
 public:
  SeedCellImpl(int dims, int64_t in, int64_t hidden, int64_t out, int convs) {
    for (int i = 0; i < convs; ++i)
      convs_.push_back(register_module("conv" + std::to_string(i),
                                       BiasFreeConv(dims, i == 0 ? in : hidden, i == convs - 1 ? out : hidden, 3)));
  }

  torch::Tensor forward(torch::Tensor x) {
    for (auto& conv : convs_) {
      x = torch::feature_dropout(conv->forward(x), kDropout, is_training());  // Dropout2d/3d
      x = torch::instance_norm(x, {}, {}, {}, {}, /*use_input_stats=*/true, /*momentum=*/0.1, kNormEpsilon,
                               /*cudnn_enabled=*/true);
      x = torch::leaky_relu(x, kLeakySlope);
    }
    return x;
  }

 private:
  std::vector<BiasFreeConv> convs_;
};
TORCH_MODULE(SeedCell);

/// torchgpipe's PopCat: the up-sampled map, zero-padded at the end of every spatial axis to
/// the size of its skip (pooling floored an odd side), then [up, skip] along the channels.
torch::Tensor concat_with_skip(torch::Tensor up, const torch::Tensor& skip) {
  std::vector<int64_t> pad;  // (before, after) per axis, last axis first
  bool padded = false;
  for (int64_t axis = skip.dim() - 1; axis >= 2; --axis) {
    pad.insert(pad.end(), {0, skip.size(axis) - up.size(axis)});
    padded = padded || pad.back() != 0;
  }
  if (padded) up = torch::constant_pad_nd(up, pad, 0);
  return torch::cat({up, skip}, 1);
}

class SeedUNetImpl : public torch::nn::Module {
 public:
  SeedUNetImpl(const SeedUNetOptions& o, std::string name) : o_(o), name_(std::move(name)) {
    const int d = o.depth();
    auto width = [&](int l) { return int64_t{o.filters} << l; };                        // F·2^ℓ
    auto halved = [&](int l) { return l == 0 ? int64_t{o.filters} / 2 : width(l - 1); };  // F·2^(ℓ−1)
    for (int l = 0; l < d; ++l)
      encoder_.push_back(register_module(
          "enc" + std::to_string(l),
          SeedCell(o.dims, l == 0 ? o.in_channels : width(l - 1), width(l), width(l), o.convs)));
    bottleneck_ = register_module("bottleneck", SeedCell(o.dims, width(d - 1), width(d), width(d - 1), o.convs));
    decoder_.resize(d, SeedCell(nullptr));
    for (int l = d - 1; l >= 0; --l)
      decoder_[l] = register_module("dec" + std::to_string(l),
                                    SeedCell(o.dims, width(l + 1), halved(l), halved(l), o.convs));
    head_ = register_module("head", BiasFreeConv(o.dims, halved(0), o.classes, 1));
  }

  torch::Tensor forward(torch::Tensor x) {
    check_input_of_forward(x);
    std::vector<torch::Tensor> skips;
    for (auto& cell : encoder_) {
      x = cell->forward(x);
      skips.push_back(x);
      x = max_pool2x(x);
    }
    x = bottleneck_->forward(x);
    for (int l = o_.depth() - 1; l >= 0; --l)
      x = decoder_[l]->forward(concat_with_skip(upsample_nearest2x(x), skips[l]));
    return head_->forward(x);
  }

 private:
  void check_input_of_forward(const torch::Tensor& x) const {
    if (active_decomposition() != nullptr)
      throw std::invalid_argument(name_ + ": cannot be split across ranks (spatial decomposition): its instance "
                                          "norms and convolutions are not decomposition-aware");
    check_input(x, o_.dims, o_.in_channels, 1, name_.c_str());
    const int64_t smallest = int64_t{1} << o_.depth();
    for (int axis = 0; axis < o_.dims; ++axis)
      if (x.size(2 + axis) < smallest)
        throw std::invalid_argument(name_ + ": spatial side " + std::to_string(x.size(2 + axis)) +
                                    " is smaller than 2^" + std::to_string(o_.depth()) + " = " +
                                    std::to_string(smallest) + " (" + std::to_string(o_.depth()) + " poolings)");
  }

  SeedUNetOptions o_;
  std::string name_;
  std::vector<SeedCell> encoder_, decoder_;
  SeedCell bottleneck_{nullptr};
  BiasFreeConv head_{nullptr};
};
TORCH_MODULE(SeedUNet);

/// `base` with what the caller gave; norm may only be the seed's ("instance"), which the host
/// passes along with every registry model's options.
SeedUNetOptions read_options(const ModelOptions& m, SeedUNetOptions o) {
  m.expect_only({"convs", "norm"});
  if (const std::string norm = m.get_string("norm", "instance"); norm != "instance")
    throw std::invalid_argument("norm must be instance (the seed's, without affine parameters), got '" + norm + "'");
  read_unet_like(m, o);
  o.validate();
  return o;
}

/// The factory's defaults as the host sees them (ModelEntry::defaults).
ModelOptions as_model_options(const SeedUNetOptions& o) {
  return unet_like_defaults(o.dims, o.in_channels, o.classes, o.filters, o.levels, o.convs, "instance");
}

ModelFactory factory(const std::string& name, const SeedUNetOptions& defaults) {
  return [name, defaults](const ModelOptions& m) -> ModelHandle {
    SeedUNet net(read_options(m, defaults), name);
    SeedUNetImpl* raw = net.get();
    // Its dropouts and wiring are not core's U-Net shape: no layer sequence, so --pp refuses it.
    return {net.ptr(), [raw](const torch::Tensor& x) { return raw->forward(x); }, std::nullopt};
  };
}

/// The seed's table: depth L, num_convs n_c, and the trainable parameters it reports at
/// 64 filters, 4 input channels and 1 output channel.
struct SeedPreset {
  const char* name;
  const char* seed_name;
  int depth;
  int convs;
  const char* parameters;
};
constexpr SeedPreset kSeedPresets[] = {
    {"s0-small", "Small", 5, 2, "72,301,856"},
    {"s0-medium1", "Medium-1", 5, 5, "232,687,904"},
    {"s0-medium2", "Medium-2", 6, 2, "289,357,088"},
    {"s0-large", "Large", 7, 2, "1,157,578,016"},
};

}  // namespace
}  // namespace tessera::plugins

uint32_t tessera_plugin_abi_version(void) { return TESSERA_PLUGIN_ABI_VERSION; }

int tessera_plugin_init(tessera::PluginRegistrar* registrar) {
  using namespace tessera::plugins;
  const SeedUNetOptions small;
  registrar->add_model({"s0-unet",
                        "seed benchmark U-Net (Seal et al. 2020 = torchgpipe's): bias-free convs, instance norm, "
                        "nearest up-sampling; options levels (= seed L + 1), convs, filters; defaults Small",
                        factory("s0-unet", small), {}, as_model_options(small)});
  for (const SeedPreset& p : kSeedPresets) {
    SeedUNetOptions o;
    o.levels = p.depth + 1;
    o.convs = p.convs;
    const std::string shape = "L " + std::to_string(p.depth) + ", n_c " + std::to_string(p.convs) + " = levels " +
                              std::to_string(o.levels) + ", convs " + std::to_string(p.convs);
    registrar->add_model({p.name,
                          std::string("seed benchmark U-Net ") + p.seed_name + " (" + shape + "): " + p.parameters +
                              " parameters at 64 filters, 4 bands, 1 class",
                          factory(p.name, o), {}, as_model_options(o)});
  }
  return 0;
}
