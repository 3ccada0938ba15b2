// Deep supervision for the plain U-Net (deep_supervision.hpp).
#include "deep_supervision.hpp"

#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera::detail {

std::vector<double> deep_supervision_weights(int levels) {
  TESSERA_CHECK(levels >= 2);
  std::vector<double> w;
  for (int l = 0; l + 1 < levels; ++l) w.push_back(1.0 / double(int64_t{1} << l));
  if (w.size() >= 2) w.back() = 0;
  double sum = 0;
  for (double v : w) sum += v;
  for (double& v : w) v /= sum;
  return w;
}

DeepSupervisionHeadsImpl::DeepSupervisionHeadsImpl(const UNetOptions& unet) {
  const std::vector<double> w = deep_supervision_weights(unet.levels);
  for (int l = 1; l < static_cast<int>(w.size()); ++l) {
    if (w[size_t(l)] == 0) continue;
    levels_.push_back(l);
    heads_.emplace(l, register_module("head" + std::to_string(l),
                                      ConvNd(unet.dims, int64_t{unet.base_filters} << l, unet.classes, 1, 0)));
  }
}

torch::Tensor DeepSupervisionHeadsImpl::forward(int level, const torch::Tensor& features) {
  return heads_.at(level)->forward(features);
}

torch::Tensor forward_keeping_decoder(UNet& net, torch::Tensor x, const std::vector<int>& levels,
                                      std::map<int, torch::Tensor>& features) {
  const UNetOptions& o = net->options();
  TESSERA_CHECK(o.is_builtin() && o.padding == Padding::kSame);
  if (net->channels_last())
    x = x.contiguous(o.dims == 2 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d);
  const LayerSequence seq = net->layer_sequence(x.size(2));
  // dec<ℓ> ends where up<ℓ−1> begins: the sequence runs in pieces cut there.
  std::vector<std::pair<int, int>> cuts;  // (last layer of the piece, level kept there)
  for (int level : levels)
    for (int i = 0; i < seq.size(); ++i)
      if (seq.layers[size_t(i)].name == "up" + std::to_string(level - 1)) cuts.emplace_back(i - 1, level);
  std::sort(cuts.begin(), cuts.end());
  TESSERA_CHECK(cuts.size() == levels.size());
  cuts.emplace_back(seq.size() - 1, -1);
  std::map<int, torch::Tensor> skips;  // produced by earlier pieces, consumed by later ones
  int first = 0;
  for (const auto& [last, level] : cuts) {
    std::vector<LayerModules> modules = find_layer_modules(*net, seq, first, last);
    std::map<int, torch::Tensor> out;
    x = run_layers(seq, first, last, modules, std::move(x), skips, out);
    skips.insert(out.begin(), out.end());
    if (level >= 0) features[level] = x;
    first = last + 1;
  }
  return x;
}

torch::Tensor target_at_level(const torch::Tensor& target, int level) {
  const int64_t step = int64_t{1} << level;
  torch::Tensor t = target;
  for (int64_t d = 1; d < target.dim(); ++d) t = t.slice(d, step / 2, c10::nullopt, step);
  return t;
}

}  // namespace tessera::detail
