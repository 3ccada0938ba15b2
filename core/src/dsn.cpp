#include "tessera/core/dsn.hpp"

#include <algorithm>

#include <torch/torch.h>

#include "tessera/core/decomposition.hpp"
#include "tessera/core/error.hpp"

namespace tessera {
namespace {

ConvBlockOptions block_options(const UNetOptions& o, int64_t in, int64_t out) {
  return ConvBlockOptions(o.dims, in, out)
      .with_convs(o.convs_per_level)
      .with_kernel(o.kernel)
      .with_padding(o.padding)
      .with_norm(o.norm);
}

// Filters of level ℓ of a part whose first level has `base`; the deepest level has the code's.
int64_t part_filters(const UNetOptions& o, int base, int level) {
  return level == o.levels - 1 ? dsn_code_channels(o) : int64_t{base} << level;
}

// Builds `make()` with the torch generator seeded by `seed`, leaving the global stream as it was.
template <class F>
auto seeded(uint64_t seed, F make) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle on the default stream
  const at::Tensor saved = gen.get_state();
  torch::manual_seed(seed);
  auto built = make();
  gen.set_state(saved);
  return built;
}

// The mean over the spatial axes (N, C). Under a decomposition the whole tile's: the value
// from the blocks' sums and pixel counts, the graph this block's share (the others' sums enter
// as constants), so that the blocks' gradients, summed by the trainer, are the one tile's.
torch::Tensor spatial_mean(const torch::Tensor& t) {
  const Decomposition* blocks = active_decomposition();
  if (blocks == nullptr) {
    std::vector<int64_t> spatial;
    for (int64_t d = 2; d < t.dim(); ++d) spatial.push_back(d);
    return t.mean(spatial);
  }
  const torch::Tensor sums = t.flatten(2).sum(2);
  const torch::Tensor pixels = blocks->image_sum(torch::full({1}, double(t.flatten(2).size(2)), sums.options()));
  const torch::Tensor mine = sums.detach();
  return (sums + (blocks->image_sum(mine) - mine)) / pixels;
}

// The shared encoder's levels [first, last] on `x`, level first's input (level first − 1's last
// activation; the network input for level 0): the U-Net's layers from the pool into level
// `first` to level `last`'s last activation, as UNetImpl::encode runs them all.
torch::Tensor shared_levels(UNetImpl& unet, int first, int last, torch::Tensor x, std::map<int, torch::Tensor>& skips) {
  TESSERA_CHECK(0 <= first && first <= last && last < unet.options().levels);
  const LayerSequence seq = unet_layer_sequence(unet.options(), first == 0 ? x.size(2) : x.size(2) << (first - 1));
  int from = -1, to = -1;
  for (int i = 0; i < seq.size(); ++i) {
    const Layer& l = seq.layers[static_cast<size_t>(i)];
    if (l.kind == LayerKind::kUp || l.kind == LayerKind::kHead) break;  // the encoder ends at the code
    if (l.level == first && from < 0) from = i;
    if (l.level == last) to = i;
  }
  std::vector<LayerModules> modules = find_layer_modules(unet, seq, from, to);
  return run_layers(seq, from, to, modules, std::move(x), {}, skips);
}

}  // namespace

PrivateEncoderImpl::PrivateEncoderImpl(const UNetOptions& unet, const DsnOptions& dsn) {
  for (int l = 0; l < unet.levels; ++l)
    blocks_.push_back(register_module(
        "enc" + std::to_string(l),
        ConvBlock(block_options(unet, l == 0 ? unet.in_channels : part_filters(unet, dsn.private_filters, l - 1),
                                part_filters(unet, dsn.private_filters, l)))));
}

torch::Tensor PrivateEncoderImpl::forward(torch::Tensor x) { return forward_levels(0, int(blocks_.size()) - 1, x); }

torch::Tensor PrivateEncoderImpl::forward_levels(int first, int last, torch::Tensor x) {
  TESSERA_CHECK(0 <= first && first <= last && last < int(blocks_.size()));
  for (int l = first; l <= last; ++l) {
    if (l > 0) x = max_pool2x(x);
    x = blocks_[size_t(l)]->forward(x);
  }
  return x;
}

ReconstructionDecoderImpl::ReconstructionDecoderImpl(const UNetOptions& unet, const DsnOptions& dsn) : unet_(unet) {
  for (int l = unet.levels - 2; l >= 0; --l) {
    const int64_t in = part_filters(unet, dsn.recon_filters, l + 1), out = part_filters(unet, dsn.recon_filters, l);
    ups_.push_back(register_module("up" + std::to_string(l), up_convolution(unet, in, out)));
    blocks_.push_back(register_module("dec" + std::to_string(l), ConvBlock(block_options(unet, out, out))));
  }
  out_ = register_module("out", ConvNd(unet.dims, part_filters(unet, dsn.recon_filters, 0), unet.in_channels, 1, 0));
}

torch::Tensor ReconstructionDecoderImpl::forward(torch::Tensor code) {
  for (size_t i = 0; i < ups_.size(); ++i) {
    code = ups_[i]->forward(code);
    if (unet_.decoder == Decoder::kUpsample) code = upsample_nearest2x(code);
    code = blocks_[i]->forward(code);
  }
  return out_->forward(code);
}

DomainClassifierImpl::DomainClassifierImpl(const UNetOptions& unet, const DsnOptions& dsn) {
  for (int l = 0; l < unet.levels; ++l) {
    const std::string level = "level" + std::to_string(l);  // level<ℓ>_fc0, level<ℓ>_fc1
    hidden_.push_back(register_module(level + "_fc0", ConvNd(unet.dims, int64_t{unet.base_filters} << l, dsn.classifier_hidden, 1, 0)));
    out_.push_back(register_module(level + "_fc1", ConvNd(unet.dims, dsn.classifier_hidden, dsn.domains, 1, 0)));
  }
}

std::vector<torch::Tensor> DomainClassifierImpl::forward(const std::vector<torch::Tensor>& levels) {
  TESSERA_CHECK(levels.size() == hidden_.size());
  std::vector<torch::Tensor> logits;
  for (size_t l = 0; l < levels.size(); ++l) logits.push_back(out_[l]->forward(torch::relu(hidden_[l]->forward(levels[l]))));
  return logits;
}

DsnPartsImpl::DsnPartsImpl(const UNetOptions& unet, const DsnOptions& dsn, const std::vector<int>& owned, uint64_t seed)
    : owned_(owned) {
  for (int d : owned_) {
    TESSERA_CHECK(d >= 0 && d < dsn.domains);
    private_.emplace(d, register_module("private" + std::to_string(d),
                                        seeded(seed + 1 + uint64_t(d), [&] { return PrivateEncoder(unet, dsn); })));
  }
  recon = register_module("recon", seeded(seed + 1001, [&] { return ReconstructionDecoder(unet, dsn); }));
  classifier = register_module("classifier", seeded(seed + 1002, [&] { return DomainClassifier(unet, dsn); }));
}

PrivateEncoder& DsnPartsImpl::private_encoder(int domain) {
  auto it = private_.find(domain);
  TESSERA_CHECK(it != private_.end());
  return it->second;
}

std::vector<torch::Tensor> DsnPartsImpl::private_parameters(int domain) {
  return private_encoder(domain)->parameters();
}

std::vector<torch::Tensor> DsnPartsImpl::shared_parameters() {
  std::vector<torch::Tensor> p = recon->parameters();
  for (auto& t : classifier->parameters()) p.push_back(t);
  return p;
}

DsnImpl::DsnImpl(UNetOptions unet_options, DsnOptions dsn, std::vector<int> owned, uint64_t seed)
    : dsn_(std::move(dsn)) {
  unet_options.validate();
  dsn_.validate(unet_options);
  unet = register_module("unet", seeded(seed, [&] { return UNet(unet_options); }));
  parts = register_module("parts", DsnParts(unet_options, dsn_, owned, seed));
}

void DsnImpl::use_channels_last() {
  unet->use_channels_last();
  torch::NoGradGuard no_grad;
  const int dims = unet->options().dims;
  const auto format = dims == 2 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d;
  for (auto& p : parts->parameters())
    if (p.dim() == dims + 2) p.set_data(p.contiguous(format));
  channels_last_ = true;
}

DsnCodes DsnImpl::start(const torch::Tensor& input) const {
  const int dims = unet->options().dims;
  DsnCodes codes;
  codes.shared = channels_last_ ? input.contiguous(dims == 2 ? at::MemoryFormat::ChannelsLast
                                                             : at::MemoryFormat::ChannelsLast3d)
                                : input;
  codes.private_code = codes.shared;
  return codes;
}

void DsnImpl::encode_levels(int first, int last, DsnCodes& codes, int domain) {
  codes.shared = shared_levels(*unet, first, last, codes.shared, codes.skips);
  codes.private_code = parts->private_encoder(domain)->forward_levels(first, last, codes.private_code);
}

DsnOutputs DsnImpl::heads(DsnCodes codes, bool task) {
  DsnOutputs out;
  out.shared_code = codes.shared;
  out.private_code = codes.private_code;
  out.reconstruction = parts->recon->forward(out.shared_code + out.private_code);
  if (task) out.logits = unet->decode(out.shared_code, codes.skips);
  // Levels by side: the skips from the finest (level 0) down, then the code.
  for (const auto& [e, t] : codes.skips) out.levels.push_back(t);
  std::sort(out.levels.begin(), out.levels.end(), [](const torch::Tensor& a, const torch::Tensor& b) { return a.size(2) > b.size(2); });
  out.levels.push_back(out.shared_code);
  std::vector<torch::Tensor> means;
  for (const auto& t : out.levels) means.push_back(spatial_mean(t));
  out.pooled = torch::cat(means, 1);
  return out;
}

DsnOutputs DsnImpl::forward(const torch::Tensor& input, int domain, bool task) {
  DsnCodes codes = start(input);
  encode_levels(0, unet->options().levels - 1, codes, domain);
  return heads(std::move(codes), task);
}

std::vector<torch::Tensor> DsnImpl::shared_parameters() {
  std::vector<torch::Tensor> p = unet->parameters();
  for (auto& t : parts->shared_parameters()) p.push_back(t);
  return p;
}

}  // namespace tessera
