#include <filesystem>
#include <limits>
#include <optional>

#include <torch/torch.h>

#include "infer_parts.hpp"
#include "tessera/core/tensor_io.hpp"
#include "tessera/io/components.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/probability_raster.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/io/resample.hpp"

namespace tessera::engine::infer {
namespace {

namespace fs = std::filesystem;

// The label sink of a rank that computes but does not write (ranks other than 0 under --sp).
class DiscardedLabels final : public LabelSink {
 public:
  void write(const Box&, const Block<uint8_t>&) override {}
  void commit() override {}
};

Block<float> to_block_f32(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kFloat).contiguous();
  Block<float> b(Index(c.sizes().begin(), c.sizes().end()));
  std::copy(c.data_ptr<float>(), c.data_ptr<float>() + c.numel(), b.data.begin());
  return b;
}

void make_parent(const std::string& path) {
  if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
}

// The labels' sink on `original`'s grid: the file's, with the largest component of each of
// `keep_largest` kept (volumes; none: nothing changes).
std::unique_ptr<LabelSink> label_sink(const std::string& labels, const ImageSource& original, const io::LabelStyle& style,
                                      const std::vector<int>& keep_largest) {
  make_parent(labels);
  std::unique_ptr<LabelSink> sink = io::create_label_sink(labels, original.info(), style);
  if (keep_largest.empty() || original.info().extent.size() != 3) return sink;
  return std::make_unique<io::LargestComponentSink>(std::move(sink), original.info().extent, keep_largest);
}

// A model run on another grid than the input's: softmax of every tile kept on the network's
// grid, resampled linearly class by class onto the input's own and argmaxed there (nnU-Net's
// way back; nearest-neighbour labels would widen every structure by up to half a voxel).
InferenceReport write_resampled(UNet& net, const ImageSource& image, const Normalization& norm,
                                std::unique_ptr<LabelSink> sink, const ImageSource& original,
                                const InferenceOptions& options) {
  io::ResamplingProbabilitySink probabilities(std::move(sink), static_cast<int>(net->options().classes),
                                              io::grid_of(image.info()), io::grid_of(original.info()),
                                              static_cast<uint8_t>(kNoDataLabel));
  auto write = [&](const Tile& t, const torch::Tensor& logits, const torch::Tensor& valid) {
    auto p = torch::softmax(logits.to(torch::kFloat), 0)
                 .masked_fill_(valid.logical_not().unsqueeze(0), std::numeric_limits<float>::quiet_NaN());
    probabilities.write(t.inset, to_block_f32(p));
  };
  const InferenceReport r = for_each_tile(net, image, norm, options, write);
  probabilities.commit();
  return r;
}

// GDAL's block cache while a stream runs (options.strip > 0) on a raster: the block rows its
// strips are in, the input's and the outputs' (`output_bytes` a pixel, GeoTIFF tiles of 256),
// across the widest column group (and its halo), a quarter more for strips across two. The
// default cap kept up to 16 MiB of blocks the strips had left behind (a 4096² 4-band UInt16
// scene: 11 MiB instead; 6 MiB in two column groups). 0: leave it.
int64_t stream_block_cache_bytes(const ImageSource& image, const UNetOptions& model, const InferenceOptions& options,
                                 int64_t output_bytes) {
  const auto* raster = dynamic_cast<const io::RasterReader*>(&image);
  if (options.strip <= 0 || !raster) return 0;
  const int64_t group = group_widths(model, image.info().extent, options.groups).front();
  const int64_t outputs = group * io::LabelRasterOptions::kDefaultBlock * output_bytes;
  return (raster->block_row_bytes(group + 2 * unet_halo(model)) + outputs) * 5 / 4;
}

}  // namespace

InferenceReport write_labels(const InferOptions& o, UNet& net, const ImageSource& image, const ImageSource& original,
                             const Normalization& norm, const std::string& labels, const std::string& probabilities,
                             const InferenceOptions& options, bool writes, const std::vector<std::string>& class_names,
                             const io::LabelStyle& style, const std::vector<int>& keep_largest) {
  std::unique_ptr<LabelSink> sink =
      writes ? label_sink(labels, original, style, keep_largest) : std::make_unique<DiscardedLabels>();
  if (writes && &image != &original) return write_resampled(net, image, norm, std::move(sink), original, options);
  const int64_t classes = net->options().classes;
  if (o.probabilities.empty()) {
    std::optional<io::GdalCacheCap> cache;
    if (const int64_t bytes = stream_block_cache_bytes(image, net->options(), options, 1)) cache.emplace(bytes);
    const InferenceReport r = infer_labels(net, image, norm, *sink, options);
    cache.reset();
    sink->commit();
    return r;
  }
  std::optional<io::ProbabilityRasterWriter> probs;
  if (writes) {
    make_parent(probabilities);
    probs.emplace(io::ProbabilityRasterOptions(probabilities, image.info().extent, image.info().geo,
                                               static_cast<int>(net->options().classes))
                      .with_class_names(class_names)
                      .with_cog(o.cog));
  }
  auto write = [&](const Tile& t, const torch::Tensor& logits, const torch::Tensor& valid) {
    if (!probs) return;
    auto argmax = logits.argmax(0).to(torch::kUInt8).masked_fill_(valid.logical_not(), int64_t{kNoDataLabel});
    sink->write(t.inset, to_block_u8(argmax));
    auto p = torch::softmax(logits.to(torch::kFloat), 0)
                 .masked_fill_(valid.logical_not().unsqueeze(0), std::numeric_limits<float>::quiet_NaN());
    probs->write(t.inset, to_block_f32(p));
  };
  std::optional<io::GdalCacheCap> cache;
  if (const int64_t bytes = stream_block_cache_bytes(image, net->options(), options, 1 + 4 * classes)) cache.emplace(bytes);
  const InferenceReport r = for_each_tile(net, image, norm, options, write);
  cache.reset();
  if (probs) probs->commit();
  sink->commit();
  return r;
}

}  // namespace tessera::engine::infer
