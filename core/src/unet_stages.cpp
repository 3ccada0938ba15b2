#include "tessera/core/unet_stages.hpp"

#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

std::string range_text(int first, int last) {
  return "[" + std::to_string(first) + ", " + std::to_string(last) + "]";
}

// Centre crop of the spatial axes of x to `side` per axis (as center_crop in unet.cpp).
torch::Tensor crop_to(const torch::Tensor& x, int64_t side) {
  torch::Tensor y = x;
  for (int64_t d = 2; d < x.dim(); ++d) {
    const int64_t diff = x.size(d) - side;
    TESSERA_CHECK(diff >= 0 && diff % 2 == 0);
    if (diff > 0) y = y.narrow(d, diff / 2, side);
  }
  return y;
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
  const int64_t pad = o.padding == Padding::kSame ? (o.kernel - 1) / 2 : 0;
  const bool transposed = o.decoder == Decoder::kTransposed;
  for (int i = first; i <= last; ++i) {
    const Layer& l = seq_.layers[static_cast<size_t>(i)];
    const auto dot = l.name.find('.');
    switch (l.kind) {
      case LayerKind::kConv:
        convs_.emplace(i, holder(l.name.substr(0, dot))
                              .register_module(l.name.substr(dot + 1),
                                               ConvNd(o.dims, l.in_channels, l.out_channels, o.kernel, pad)));
        break;
      case LayerKind::kNorm:
        norms_.emplace(i, holder(l.name.substr(0, dot))
                              .register_module(l.name.substr(dot + 1), NormNd(o.norm, l.out_channels)));
        break;
      case LayerKind::kUp:
        convs_.emplace(i, register_module(l.name, ConvNd(o.dims, l.in_channels, l.out_channels, transposed ? 2 : 1, 0,
                                                         transposed ? 2 : 1, transposed)));
        break;
      case LayerKind::kHead:
        convs_.emplace(i, register_module(l.name, ConvNd(o.dims, l.in_channels, l.out_channels, 1, 0)));
        break;
      case LayerKind::kActivation:
      case LayerKind::kPool:
      case LayerKind::kConcat:
        break;
    }
  }
  for (int e = 0; e < static_cast<int>(seq_.skips.size()); ++e) {
    const SkipEdge& s = seq_.skips[static_cast<size_t>(e)];
    if (s.producer < first && s.consumer >= first && s.consumer <= last) skips_in_.push_back(e);
    if (s.producer >= first && s.producer <= last && s.consumer > last) skips_out_.push_back(e);
  }

  // Copy the full model's values under the same names; a missing name or shape is a bug here.
  torch::NoGradGuard no_grad;
  const auto params = full.named_parameters();
  for (auto& p : named_parameters()) {
    const torch::Tensor* src = params.find(p.key());
    TESSERA_CHECK(src != nullptr && src->sizes() == p.value().sizes());
    p.value().copy_(*src);
  }
  const auto buffers = full.named_buffers();
  for (auto& b : named_buffers()) {
    const torch::Tensor* src = buffers.find(b.key());
    TESSERA_CHECK(src != nullptr && src->sizes() == b.value().sizes());
    b.value().copy_(*src);
  }
}

torch::nn::Module& UNetStageImpl::holder(const std::string& name) {
  auto it = holders_.find(name);
  if (it == holders_.end())
    it = holders_.emplace(name, register_module(name, std::make_shared<torch::nn::Module>())).first;
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

StageTensors UNetStageImpl::forward(const StageTensors& in) {
  const UNetOptions& o = seq_.options;
  if (!in.main.defined() || in.main.sizes().vec() != input_shape(in.main.size(0)))
    throw Error("unet stage " + range_text(first_, last_) + ": main input has the wrong shape");
  for (int e : skips_in_) {
    const auto it = in.skips.find(e);
    if (it == in.skips.end() || it->second.sizes().vec() != skip_shape(e, in.main.size(0)))
      throw Error("unet stage " + range_text(first_, last_) + ": skip " + std::to_string(e) +
                  " is missing or has the wrong shape");
  }
  StageTensors out;
  std::map<int, torch::Tensor> local;  // skips produced and consumed here, uncropped
  torch::Tensor x = in.main;
  for (int i = first_; i <= last_; ++i) {
    const Layer& l = seq_.layers[static_cast<size_t>(i)];
    switch (l.kind) {
      case LayerKind::kConv:
      case LayerKind::kHead:
        x = convs_.at(i)->forward(x);
        break;
      case LayerKind::kNorm:
        x = norms_.at(i)->forward(x);
        break;
      case LayerKind::kActivation:
        x = torch::relu(x);
        break;
      case LayerKind::kPool:
        x = o.dims == 2 ? torch::max_pool2d(x, 2) : torch::max_pool3d(x, 2);
        break;
      case LayerKind::kUp:
        x = convs_.at(i)->forward(x);
        if (o.decoder == Decoder::kUpsample)
          x = o.dims == 2 ? torch::upsample_nearest2d(x, {x.size(2) * 2, x.size(3) * 2})
                          : torch::upsample_nearest3d(x, {x.size(2) * 2, x.size(3) * 2, x.size(4) * 2});
        break;
      case LayerKind::kConcat: {
        torch::Tensor skip;
        for (int e = 0; e < static_cast<int>(seq_.skips.size()); ++e) {
          const SkipEdge& s = seq_.skips[static_cast<size_t>(e)];
          if (s.consumer != i) continue;
          skip = s.producer >= first_ ? crop_to(local.at(e), l.out_side) : in.skips.at(e);
        }
        TESSERA_CHECK(skip.defined());
        x = torch::cat({skip, x}, 1);
        break;
      }
    }
    for (int e = 0; e < static_cast<int>(seq_.skips.size()); ++e) {
      const SkipEdge& s = seq_.skips[static_cast<size_t>(e)];
      if (s.producer != i) continue;
      if (s.consumer <= last_)
        local[e] = x;
      else
        out.skips[e] = crop_to(x, seq_.layers[static_cast<size_t>(s.consumer)].out_side);
    }
  }
  out.main = x;
  return out;
}

}  // namespace tessera
