#pragma once
// The check's images: an ImageSource over a CPU tensor (C, H, W) float, and the smooth
// synthetic scene and labels the steps use (no files: the GPU machine has no GDAL).
#include <algorithm>
#include <cstring>
#include <string>

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/image_source.hpp"

namespace tessera::gpu_check {

class TensorImage final : public ImageSource {
 public:
  explicit TensorImage(torch::Tensor chw, std::string name = "memory")
      : data_(chw.to(torch::kCPU, torch::kFloat).contiguous()) {
    TESSERA_CHECK(data_.dim() == 3);
    info_.path = std::move(name);
    info_.kind = "raster";
    info_.format = "tensor";
    info_.data_type = "Float32";
    info_.extent = {data_.size(1), data_.size(2)};
    info_.channels = int(data_.size(0));
    info_.nodata.assign(size_t(info_.channels), std::nullopt);
  }
  const ImageInfo& info() const override { return info_; }
  Block<float> read(const Box& box) const override {
    TESSERA_CHECK(Box({Index(2, 0), info_.extent}).contains(box));
    Block<float> out({info_.channels, box.size[0], box.size[1]});
    const torch::Tensor window =
        data_.narrow(1, box.origin[0], box.size[0]).narrow(2, box.origin[1], box.size[1]).contiguous();
    std::memcpy(out.data.data(), window.data_ptr<float>(), out.data.size() * sizeof(float));
    return out;
  }
  const torch::Tensor& tensor() const { return data_; }

 private:
  torch::Tensor data_;
  ImageInfo info_;
};

/// A smooth 4-band-like scene (channels, side, side) in about [-1, 1]: sums of sines with
/// per-channel phases and a little seeded noise, so classes form regions, not speckle.
inline torch::Tensor synthetic_scene(int channels, int64_t side, uint64_t seed) {
  torch::manual_seed(seed);
  const torch::Tensor y = torch::arange(side, torch::kFloat).view({1, side, 1});
  const torch::Tensor x = torch::arange(side, torch::kFloat).view({1, 1, side});
  const torch::Tensor c = torch::arange(channels, torch::kFloat).view({channels, 1, 1});
  torch::Tensor s = torch::sin(0.021f * y * (c + 1) + c) + torch::cos(0.017f * x * (2 - 0.3f * c) + 0.5f * c);
  return (0.5f * s + 0.1f * torch::randn({channels, side, side})).contiguous();
}

/// Labels (1, side, side) of `classes` classes from the scene: the band with the largest value.
inline torch::Tensor synthetic_labels(const torch::Tensor& scene, int classes) {
  return scene.narrow(0, 0, std::min<int64_t>(classes, scene.size(0))).argmax(0, true).to(torch::kFloat);
}

}  // namespace tessera::gpu_check
