#include "tessera/core/tensor_io.hpp"

#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera {

torch::Tensor to_tensor(const Block<float>& block) {
  return torch::from_blob(const_cast<float*>(block.data.data()), block.shape, torch::kFloat32).clone();
}

Block<uint8_t> to_block_u8(const torch::Tensor& labels) {
  auto t = labels.to(torch::kUInt8).contiguous();
  Index shape{1};
  for (int64_t s : t.sizes()) shape.push_back(s);
  Block<uint8_t> b(shape);
  std::memcpy(b.data.data(), t.data_ptr<uint8_t>(), b.data.size());
  return b;
}

Normalization identity_normalization(int channels) {
  return {std::vector<float>(channels, 0.f), std::vector<float>(channels, 1.f)};
}

Window read_window(const ImageSource& source, const Box& box, const Normalization& norm) {
  const Index& extent = source.info().extent;
  const int d = box.dims();
  TESSERA_CHECK(static_cast<int>(extent.size()) == d);
  // Per axis: the reflected source index of every window position, and their span.
  std::vector<std::vector<int64_t>> maps(d);
  Box span{Index(d), Index(d)};
  for (int a = 0; a < d; ++a) {
    int64_t lo = extent[a], hi = -1;
    maps[a].resize(box.size[a]);
    for (int64_t i = 0; i < box.size[a]; ++i) {
      const int64_t r = reflect_index(box.origin[a] + i, extent[a]);
      maps[a][i] = r;
      lo = std::min(lo, r);
      hi = std::max(hi, r);
    }
    span.origin[a] = lo;
    span.size[a] = hi - lo + 1;
  }
  torch::Tensor x = to_tensor(source.read(span));
  for (int a = 0; a < d; ++a) {
    const bool identity = box.origin[a] == span.origin[a] && box.size[a] == span.size[a];
    if (identity) continue;
    auto idx = torch::tensor(maps[a], torch::kInt64) - span.origin[a];
    x = x.index_select(a + 1, idx);
  }
  const int channels = static_cast<int>(x.size(0));
  // An "mr" description is resolved per image before reading (io::resolve_normalization).
  TESSERA_CHECK(norm.resolved());
  if (static_cast<int>(norm.offset.size()) != channels || static_cast<int>(norm.scale.size()) != channels)
    throw Error(source.info().path + ": has " + std::to_string(channels) + " channels but the model's normalisation has " +
                std::to_string(norm.offset.size()));
  std::vector<int64_t> bshape(d + 1, 1);
  bshape[0] = channels;
  auto offset = torch::tensor(norm.offset).view(bshape);
  auto scale = torch::tensor(norm.scale).view(bshape);
  auto nan = torch::isnan(x);
  if (!norm.clip_low.empty() || !norm.clip_high.empty()) {
    TESSERA_CHECK(norm.clip_low.size() == norm.offset.size() && norm.clip_high.size() == norm.offset.size());
    x = torch::max(torch::min(x, torch::tensor(norm.clip_high).view(bshape)), torch::tensor(norm.clip_low).view(bshape));
  }
  Window w;
  w.valid = nan.any(0).logical_not();
  w.values = ((x - offset) / scale).masked_fill_(nan, 0.0f).contiguous();
  return w;
}

torch::Tensor read_labels(const ImageSource& labels, const Box& box, int classes, int64_t ignore_index) {
  auto x = to_tensor(labels.read(box));
  if (x.size(0) != 1)
    throw Error(labels.info().path + ": a label image must have one band, it has " + std::to_string(x.size(0)));
  x = x[0];
  auto bad = torch::isnan(x) | (x < 0) | (x >= classes) | (x != x.round());
  return x.masked_fill(bad, 0).to(torch::kInt64).masked_fill_(bad, ignore_index);
}

}  // namespace tessera
