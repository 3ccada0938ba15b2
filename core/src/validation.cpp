#include "validation.hpp"

#include <limits>

#include <torch/torch.h>

#include "tessera/core/inference.hpp"
#include "tessera/core/tensor_io.hpp"

namespace tessera::detail {
namespace {

bool meets(const Box& a, const Box& b) {
  for (int i = 0; i < a.dims(); ++i)
    if (a.origin[i] >= b.origin[i] + b.size[i] || b.origin[i] >= a.origin[i] + a.size[i]) return false;
  return true;
}

Box intersection(const Box& a, const Box& b) {
  Box out = a;
  for (int i = 0; i < a.dims(); ++i) {
    out.origin[i] = std::max(a.origin[i], b.origin[i]);
    out.size[i] = std::max<int64_t>(0, std::min(a.origin[i] + a.size[i], b.origin[i] + b.size[i]) - out.origin[i]);
  }
  return out;
}

}  // namespace

torch::Tensor validation_confusion(UNet& net, const std::vector<TrainingPair>& validation, const Normalization& norm,
                                   int64_t tile, int replica, int replicas) {
  const UNetOptions& model = net->options();
  const int64_t classes = model.classes;
  torch::Tensor confusion = torch::zeros({classes * classes}, torch::kDouble);
  InferenceOptions io;
  io.tile = tile;
  io.progress = false;
  io.prefetch = false;
  for (const TrainingPair& p : validation) {
    if (p.region.empty()) continue;
    const TileGrid grid = make_tile_grid(model, p.image->info().extent, tile);
    std::vector<int64_t> mine;
    int64_t k = 0;
    for (int64_t i = 0; i < grid.size(); ++i)
      if (meets(grid.tile(i).inset, p.region) && k++ % replicas == replica) mine.push_back(i);
    size_t next = 0;
    for_each_tile(
        net, *p.image, p.norm ? *p.norm : norm, io,
        [&](const Tile& t, const torch::Tensor& logits, const torch::Tensor& valid) {
          const Box box = intersection(t.inset, p.region);
          torch::Tensor pred = logits.argmax(0).cpu(), ok = valid.cpu();  // the labels are on the host
          for (int a = 0; a < box.dims(); ++a) {
            pred = pred.narrow(a, box.origin[a] - t.inset.origin[a], box.size[a]);
            ok = ok.narrow(a, box.origin[a] - t.inset.origin[a], box.size[a]);
          }
          const torch::Tensor truth = read_labels(*p.labels, box, model.classes, -1);
          const torch::Tensor keep = ok.logical_and(truth >= 0);
          const torch::Tensor pairs = truth.masked_select(keep) * classes + pred.masked_select(keep);
          confusion += torch::bincount(pairs, {}, classes * classes).to(torch::kDouble);
        },
        [&]() -> int64_t { return next < mine.size() ? mine[next++] : -1; });
  }
  return confusion.view({classes, classes});
}

std::vector<double> dice_from_confusion(const torch::Tensor& confusion) {
  const torch::Tensor c = confusion.to(torch::kDouble);
  const torch::Tensor tp = c.diagonal();
  const torch::Tensor truth = c.sum(1), pred = c.sum(0);
  std::vector<double> dice;
  for (int64_t k = 0; k < c.size(0); ++k) {
    const double den = truth[k].item<double>() + pred[k].item<double>();
    dice.push_back(den > 0 ? 2 * tp[k].item<double>() / den : std::numeric_limits<double>::quiet_NaN());
  }
  return dice;
}

}  // namespace tessera::detail
