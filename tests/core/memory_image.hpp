#pragma once
// An in-memory ImageSource / LabelSink for tests: values from a formula, no files.
#include <functional>

#include "tessera/core/error.hpp"
#include "tessera/core/image_source.hpp"

namespace tessera::testing {

class MemoryImage final : public ImageSource {
 public:
  MemoryImage(Index extent, int channels, std::function<float(int c, const Index& at)> value) {
    info_.path = "memory";
    info_.kind = extent.size() == 2 ? "raster" : "volume";
    info_.extent = std::move(extent);
    info_.channels = channels;
    info_.nodata.assign(channels, std::nullopt);
    int64_t n = 1;
    for (int64_t e : info_.extent) n *= e;
    data_.resize(n * channels);
    Index at(info_.extent.size());
    for (int c = 0; c < channels; ++c)
      for (int64_t i = 0; i < n; ++i) {
        int64_t rest = i;
        for (int a = int(at.size()) - 1; a >= 0; --a) {
          at[a] = rest % info_.extent[a];
          rest /= info_.extent[a];
        }
        data_[c * n + i] = value(c, at);
      }
  }
  const ImageInfo& info() const override { return info_; }
  Block<float> read(const Box& box) const override {
    TESSERA_CHECK(Box({Index(box.dims(), 0), info_.extent}).contains(box));
    Index shape{info_.channels};
    for (int64_t s : box.size) shape.push_back(s);
    Block<float> out(shape);
    int64_t n = 1;
    for (int64_t e : info_.extent) n *= e;
    const int64_t m = box.count();
    Index at(box.dims());
    for (int c = 0; c < info_.channels; ++c)
      for (int64_t i = 0; i < m; ++i) {
        int64_t rest = i, src = 0, stride = 1;
        for (int a = box.dims() - 1; a >= 0; --a) {
          src += (box.origin[a] + rest % box.size[a]) * stride;
          rest /= box.size[a];
          stride *= info_.extent[a];
        }
        out.data[c * m + i] = data_[c * n + src];
      }
    return out;
  }

 private:
  ImageInfo info_;
  std::vector<float> data_;
};

class MemorySink final : public LabelSink {
 public:
  explicit MemorySink(Index extent) : extent_(std::move(extent)) {
    int64_t n = 1;
    for (int64_t e : extent_) n *= e;
    labels.assign(n, 0);
    writes.assign(n, 0);
  }
  void write(const Box& box, const Block<uint8_t>& l) override {
    const int64_t m = box.count();
    for (int64_t i = 0; i < m; ++i) {
      int64_t rest = i, dst = 0, stride = 1;
      for (int a = box.dims() - 1; a >= 0; --a) {
        dst += (box.origin[a] + rest % box.size[a]) * stride;
        rest /= box.size[a];
        stride *= extent_[a];
      }
      labels[dst] = l.data[i];
      ++writes[dst];
    }
  }
  void commit() override { committed = true; }
  std::vector<uint8_t> labels;
  std::vector<int> writes;
  bool committed = false;

 private:
  Index extent_;
};

}  // namespace tessera::testing
