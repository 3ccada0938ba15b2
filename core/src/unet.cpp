#include "tessera/core/unet.hpp"

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/model_registry.hpp"

namespace tessera {
namespace {

// The smallest input side the network takes: its layer sequence gives the forward's order.
int64_t smallest_valid_side(const UNetOptions& o) {
  constexpr int64_t kLimit = int64_t{1} << 24;
  for (int64_t side = 1; side < kLimit; ++side)
    if (unet_output_size(o, side)) return side;
  TESSERA_CHECK(!"a valid U-Net takes some input side");
  return 0;
}

ConvBlockOptions block_options(const UNetOptions& o, int64_t in, int64_t out) {
  return ConvBlockOptions(o.dims, in, out)
      .with_convs(o.convs_per_level)
      .with_kernel(o.kernel)
      .with_padding(o.padding)
      .with_norm(o.norm);
}

// The skip consumed by the concatenation at layer i.
int skip_consumed_at(const LayerSequence& seq, int i) {
  for (int e = 0; e < static_cast<int>(seq.skips.size()); ++e)
    if (seq.skips[static_cast<size_t>(e)].consumer == i) return e;
  TESSERA_CHECK(!"every concatenation consumes a skip");
  return -1;
}

// Centre crop of x's spatial axes to `sides` less `margin` (indexed like x.sizes(); the first two ignored).
torch::Tensor crop_spatial(const torch::Tensor& x, c10::IntArrayRef sides, int64_t margin = 0) {
  torch::Tensor y = x;
  for (int64_t d = 2; d < x.dim(); ++d) {
    const int64_t diff = x.size(d) - (sides[d] - margin);
    TESSERA_CHECK(diff >= 0 && diff % 2 == 0);
    if (diff > 0) y = y.narrow(d, diff / 2, sides[d] - margin);
  }
  return y;
}

}  // namespace

UNetImpl::UNetImpl(UNetOptions options) : options_(std::move(options)) {
  options_.validate();
  const auto& o = options_;
  if (!o.is_builtin()) {
    ModelHandle handle = model_registry().create(o.name, registry_model_options(o));
    model_ = register_module("model", handle.module);
    model_forward_ = std::move(handle.forward);
    layout_ = std::move(handle.layers);
    return;
  }
  auto filters = [&](int l) { return int64_t{o.base_filters} << l; };
  for (int l = 0; l < o.levels; ++l)
    register_module("enc" + std::to_string(l),
                    ConvBlock(block_options(o, l == 0 ? o.in_channels : filters(l - 1), filters(l))));
  for (int l = 0; l < o.levels - 1; ++l) {
    register_module("up" + std::to_string(l), up_convolution(o, filters(l + 1), filters(l)));
    register_module("dec" + std::to_string(l), ConvBlock(block_options(o, 2 * filters(l), filters(l))));
  }
  register_module("head", ConvNd(o.dims, filters(0), o.classes, 1, 0));
  layers_ = unet_layer_sequence(o, smallest_valid_side(o));
  modules_ = find_layer_modules(*this, layers_, 0, layers_.size() - 1);
}

void UNetImpl::synchronise_batch_norm(const ReplicaSum& sum) {
  for (auto& m : modules(/*include_self=*/false))
    if (auto* norm = dynamic_cast<NormNdImpl*>(m.get())) norm->synchronise(sum);
}

void UNetImpl::use_channels_last() {
  torch::NoGradGuard no_grad;
  const auto format = options_.dims == 2 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d;
  for (auto& p : parameters())
    if (p.dim() == options_.dims + 2) p.set_data(p.contiguous(format));
  channels_last_ = true;
}

torch::Device UNetImpl::device() const {
  const auto params = parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

void UNetImpl::use_contiguous() {
  torch::NoGradGuard no_grad;
  for (auto& p : parameters())
    if (!p.is_contiguous()) p.set_data(p.contiguous());
  channels_last_ = false;
}

torch::Tensor UNetImpl::forward(torch::Tensor x) {
  if (channels_last_)
    x = x.contiguous(options_.dims == 2 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d);
  if (model_forward_) return model_forward_(x);
  std::map<int, torch::Tensor> none;
  return run_layers(layers_, 0, layers_.size() - 1, modules_, std::move(x), {}, none);
}

// The sequence with the first spatial side of `x` (skips are cropped to the consumer's side;
// with `same` padding that keeps them whole, so the other sides need not match: encode and
// decode also run on a spatial block of a tile, which is not cubic).
LayerSequence UNetImpl::sequence_for(const torch::Tensor& x) const {
  if (!options_.is_builtin())
    throw Error("model " + options_.name + ": a registry model has no U-Net encoder/decoder split (a DSN needs the built-in unet)");
  TESSERA_CHECK(options_.padding == Padding::kSame && x.dim() == options_.dims + 2);
  return unet_layer_sequence(options_, x.size(2));
}

LayerSequence UNetImpl::layer_sequence(int64_t input_side) const {
  if (options_.is_builtin()) return unet_layer_sequence(options_, input_side);
  if (!layout_)
    throw Error("model " + options_.name + " presents no layer sequence (its plugin declares none: a layer of it "
                "cannot be staged), so it cannot be cut into pipeline stages");
  LayerSequence seq = unet_layer_sequence(options_, input_side);
  if (!layout_->block_tail.empty()) {
    const auto params = model_->named_parameters();
    seq = with_block_tails(std::move(seq), layout_->block_tail, [&](const std::string& block) {
      int64_t n = 0;
      for (const auto& p : params)
        if (p.key().rfind(block + "." + layout_->block_tail + ".", 0) == 0) n += p.value().numel();
      return n;
    });
  }
  seq = with_name_prefix(std::move(seq), "model.");
  // Every parameter must lie in a declared layer, or a stage would train without it.
  for (const auto& p : named_parameters()) {
    bool covered = false;
    for (const Layer& l : seq.layers) covered = covered || p.key().rfind(l.name + ".", 0) == 0;
    if (!covered)
      throw Error("model " + options_.name + ": parameter " + p.key() + " lies in no layer of the sequence its "
                  "plugin declares (a layer that cannot be staged), so it cannot be cut into pipeline stages");
  }
  return seq;
}

namespace {
// The deepest level's last activation: the layer before the first up-sampling step (or the head).
int code_layer(const LayerSequence& seq) {
  for (int i = 0; i < seq.size(); ++i) {
    const LayerKind k = seq.layers[static_cast<size_t>(i)].kind;
    if (k == LayerKind::kUp || k == LayerKind::kHead) return i - 1;
  }
  TESSERA_CHECK(!"a U-Net has a head");
  return -1;
}
}  // namespace

torch::Tensor UNetImpl::encode(torch::Tensor x, std::map<int, torch::Tensor>& skips) {
  const LayerSequence seq = sequence_for(x);
  const int last = code_layer(seq);
  std::vector<LayerModules> m(modules_.begin(), modules_.begin() + last + 1);
  return run_layers(seq, 0, last, m, std::move(x), {}, skips);
}

torch::Tensor UNetImpl::decode(torch::Tensor code, const std::map<int, torch::Tensor>& skips) {
  TESSERA_CHECK(!skips.empty() || options_.levels == 1);
  // The sequence of the network input's side: the level-0 skip, the largest, has it.
  const torch::Tensor* widest = &code;
  for (const auto& [e, t] : skips)
    if (t.size(2) > widest->size(2)) widest = &t;
  const LayerSequence seq = sequence_for(*widest);
  const int first = code_layer(seq) + 1;
  std::vector<LayerModules> m(modules_.begin() + first, modules_.end());
  std::map<int, torch::Tensor> none;
  return run_layers(seq, first, seq.size() - 1, m, std::move(code), skips, none);
}

ConvNd up_convolution(const UNetOptions& o, int64_t in, int64_t out) {
  const bool transposed = o.decoder == Decoder::kTransposed;
  return ConvNd(o.dims, in, out, transposed ? 2 : 1, 0, transposed ? 2 : 1, transposed);
}

torch::Tensor center_crop(const torch::Tensor& x, const torch::Tensor& like) {
  TESSERA_CHECK(x.dim() == like.dim());
  return crop_spatial(x, like.sizes());
}

std::vector<LayerModules> find_layer_modules(const torch::nn::Module& root, const LayerSequence& seq, int first,
                                             int last) {
  const auto named = root.named_modules(/*name_prefix=*/"", /*include_self=*/false);
  std::vector<LayerModules> found;
  for (int i = first; i <= last; ++i) {
    const Layer& l = seq.layers[static_cast<size_t>(i)];
    LayerModules m;
    const bool has_conv = l.kind == LayerKind::kConv || l.kind == LayerKind::kUp || l.kind == LayerKind::kHead;
    if (has_conv || l.kind == LayerKind::kNorm || l.kind == LayerKind::kTail) {
      const auto* module = named.find(l.name);
      TESSERA_CHECK(module != nullptr);
      if (has_conv) m.conv = ConvNd(std::dynamic_pointer_cast<ConvNdImpl>(*module));
      else if (l.kind == LayerKind::kNorm) m.norm = NormNd(std::dynamic_pointer_cast<NormNdImpl>(*module));
      else m.tail = std::dynamic_pointer_cast<BlockTailImpl>(*module);
      TESSERA_CHECK(m.conv || m.norm || m.tail);
    }
    found.push_back(std::move(m));
  }
  return found;
}

torch::Tensor run_layers(const LayerSequence& seq, int first, int last, std::vector<LayerModules>& modules,
                         torch::Tensor x, const std::map<int, torch::Tensor>& skips_in,
                         std::map<int, torch::Tensor>& skips_out) {
  TESSERA_CHECK(first >= 0 && last < seq.size() && modules.size() == static_cast<size_t>(last - first + 1));
  std::map<int, torch::Tensor> kept;  // skips produced and consumed in [first, last], uncropped
  // A convolution block's input stays alive until the block is done, as it does for a caller
  // of ConvBlockImpl::forward: peak memory and allocation pattern of the block-wise forward.
  torch::Tensor block_input;
  for (int i = first; i <= last; ++i) {
    const Layer& l = seq.layers[static_cast<size_t>(i)];
    LayerModules& m = modules[static_cast<size_t>(i - first)];
    if (l.kind == LayerKind::kConv && l.name.ends_with(".conv0")) block_input = x;
    if (l.kind == LayerKind::kPool || l.kind == LayerKind::kUp || l.kind == LayerKind::kHead) block_input.reset();
    switch (l.kind) {
      case LayerKind::kConv:
      case LayerKind::kHead:
        x = m.conv->forward(x);
        break;
      case LayerKind::kNorm:
        x = m.norm->forward(x);
        break;
      case LayerKind::kTail:
        x = m.tail->forward(x);
        break;
      case LayerKind::kActivation:
        // In place, as ConvBlockImpl, unless x is the caller's (a stage input may be a leaf
        // that needs its gradient).
        x = i > first ? torch::relu_(x) : torch::relu(x);
        break;
      case LayerKind::kPool:
        x = max_pool2x(x);
        break;
      case LayerKind::kUp:
        // Upsample decoder: 1×1 convolution before nearest up-sampling, the same result at a
        // quarter of the cost.
        x = m.conv->forward(x);
        if (seq.options.decoder == Decoder::kUpsample) x = upsample_nearest2x(x);
        break;
      case LayerKind::kConcat: {
        const int e = skip_consumed_at(seq, i);
        const bool produced_here = seq.skips[static_cast<size_t>(e)].producer >= first;
        x = torch::cat({produced_here ? center_crop(kept.at(e), x) : skips_in.at(e), x}, 1);
        // Consumed: without gradients nothing else holds it (memory_model.hpp frees a skip here).
        kept.erase(e);
        break;
      }
    }
    for (int e = 0; e < static_cast<int>(seq.skips.size()); ++e) {
      const SkipEdge& s = seq.skips[static_cast<size_t>(e)];
      if (s.producer != i) continue;
      if (s.consumer <= last)
        kept[e] = x;
      else  // cropped by what the consumer's side lacks (nothing with `same` padding: a spatial block keeps its sides)
        skips_out[e] = crop_spatial(x, x.sizes(), l.out_side - seq.layers[static_cast<size_t>(s.consumer)].out_side);
    }
  }
  return x;
}

}  // namespace tessera
