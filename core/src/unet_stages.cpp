#include "tessera/core/unet_stages.hpp"

#include "tessera/core/decomposition.hpp"

#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

std::string range_text(int first, int last) {
  return "[" + std::to_string(first) + ", " + std::to_string(last) + "]";
}

}  // namespace

UNetStageImpl::UNetStageImpl(const UNetImpl& full, LayerSequence seq, int first, int last)
    : seq_(std::move(seq)), first_(first), last_(last) {
  if (!(seq_.options == full.options()))
    throw Error("unet stage: seq describes another model than the U-Net it is cut from");
  if (first < 0 || last < first || last >= seq_.size())
    throw Error("unet stage: first/last " + range_text(first, last) + " is not a non-empty range of the " +
                std::to_string(seq_.size()) + " layers");
  const UNetOptions& o = seq_.options;
  const int64_t pad = conv_padding(o.padding, o.kernel);
  const auto full_modules = full.named_modules(/*name_prefix=*/"", /*include_self=*/false);
  for (int i = first; i <= last; ++i) {
    const Layer& l = seq_.layers[static_cast<size_t>(i)];
    const auto dot = l.name.rfind('.');
    torch::nn::Module& parent = dot == std::string::npos ? *this : holder(l.name.substr(0, dot));
    const std::string leaf = dot == std::string::npos ? l.name : l.name.substr(dot + 1);
    switch (l.kind) {
      case LayerKind::kConv:
        parent.register_module(leaf, ConvNd(o.dims, l.in_channels, l.out_channels, o.kernel, pad));
        break;
      case LayerKind::kNorm:
        parent.register_module(leaf, NormNd(o.norm, l.out_channels));
        break;
      case LayerKind::kUp:
        parent.register_module(leaf, up_convolution(o, l.in_channels, l.out_channels));
        break;
      case LayerKind::kHead:
        parent.register_module(leaf, ConvNd(o.dims, l.in_channels, l.out_channels, 1, 0));
        break;
      case LayerKind::kTail: {
        const auto* module = full_modules.find(l.name);
        const auto tail = module ? std::dynamic_pointer_cast<BlockTailImpl>(*module) : nullptr;
        if (!tail)
          throw Error("model " + o.name + ": layer " + l.name + " is not a block tail (core/blocks' BlockTail), so a "
                      "pipeline stage cannot hold it");
        parent.register_module(leaf, tail->fresh());
        break;
      }
      case LayerKind::kActivation:
      case LayerKind::kPool:
      case LayerKind::kConcat:
        break;
    }
  }
  modules_ = find_layer_modules(*this, seq_, first, last);
  for (int e = 0; e < static_cast<int>(seq_.skips.size()); ++e) {
    const SkipEdge& s = seq_.skips[static_cast<size_t>(e)];
    if (s.producer < first && s.consumer >= first && s.consumer <= last) skips_in_.push_back(e);
    if (s.producer >= first && s.producer <= last && s.consumer > last) skips_out_.push_back(e);
  }

  // Copy the full model's values under the same names. For the built-in U-Net a missing name or
  // shape is a bug here; for a registry model, a declaration (plugin.hpp) its modules do not keep.
  torch::NoGradGuard no_grad;
  const auto copy_from = [&](torch::OrderedDict<std::string, torch::Tensor> mine,
                             const torch::OrderedDict<std::string, torch::Tensor>& theirs) {
    for (auto& item : mine) {
      const torch::Tensor* src = theirs.find(item.key());
      if (src == nullptr || src->sizes() != item.value().sizes())
        throw Error("model " + o.name + ": " + item.key() + " of shape " + c10::str(item.value().sizes()) +
                    (src ? " is " + c10::str(src->sizes()) : std::string(" is missing")) +
                    " in the model: its modules are not the layer sequence it declares");
      item.value().copy_(*src);
    }
  };
  copy_from(named_parameters(), full.named_parameters());
  copy_from(named_buffers(), full.named_buffers());
}

torch::nn::Module& UNetStageImpl::holder(const std::string& path) {
  auto it = holders_.find(path);
  if (it != holders_.end()) return *it->second;
  const auto dot = path.rfind('.');
  torch::nn::Module& parent = dot == std::string::npos ? *this : holder(path.substr(0, dot));
  const std::string leaf = dot == std::string::npos ? path : path.substr(dot + 1);
  it = holders_.emplace(path, parent.register_module(leaf, std::make_shared<torch::nn::Module>())).first;
  return *it->second;
}

std::vector<int64_t> UNetStageImpl::shape(int64_t batch, int64_t channels, int64_t side) const {
  std::vector<int64_t> s{batch, channels};
  for (int d = 0; d < seq_.options.dims; ++d) s.push_back(side);
  return s;
}

std::vector<int64_t> UNetStageImpl::input_shape(int64_t batch) const {
  const Layer& l = seq_.layers[static_cast<size_t>(first_)];
  return shape(batch, l.in_channels, l.in_side);
}

std::vector<int64_t> UNetStageImpl::output_shape(int64_t batch) const {
  const Layer& l = seq_.layers[static_cast<size_t>(last_)];
  return shape(batch, l.out_channels, l.out_side);
}

std::vector<int64_t> UNetStageImpl::skip_shape(int e, int64_t batch) const {
  TESSERA_CHECK(e >= 0 && e < static_cast<int>(seq_.skips.size()));
  const SkipEdge& s = seq_.skips[static_cast<size_t>(e)];
  return shape(batch, seq_.layers[static_cast<size_t>(s.producer)].out_channels,
               seq_.layers[static_cast<size_t>(s.consumer)].out_side);
}

namespace {

// Whether `t` has `shape`; under a spatial decomposition (decomposition.hpp) a stage runs on a
// block of the tile, so only the batch and channel sizes are the tile's.
bool has_shape(const torch::Tensor& t, const std::vector<int64_t>& shape) {
  const std::vector<int64_t> got = t.sizes().vec();
  if (active_decomposition() == nullptr) return got == shape;
  return got.size() == shape.size() && got[0] == shape[0] && got[1] == shape[1];
}

}  // namespace

StageTensors UNetStageImpl::forward(const StageTensors& in) {
  if (!in.main.defined() || !has_shape(in.main, input_shape(in.main.size(0))))
    throw Error("unet stage " + range_text(first_, last_) + ": main input has the wrong shape");
  for (int e : skips_in_) {
    const auto it = in.skips.find(e);
    if (it == in.skips.end() || !has_shape(it->second, skip_shape(e, in.main.size(0))))
      throw Error("unet stage " + range_text(first_, last_) + ": skip " + std::to_string(e) +
                  " is missing or has the wrong shape");
  }
  StageTensors out;
  out.main = run_layers(seq_, first_, last_, modules_, in.main, in.skips, out.skips);
  return out;
}

}  // namespace tessera
