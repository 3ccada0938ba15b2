#include "tessera/core/inference.hpp"

#include <future>

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/tensor_io.hpp"
#include "tessera/core/tile_choice.hpp"

namespace tessera {
namespace {

struct Batch {
  std::vector<Tile> tiles;
  torch::Tensor input;               // (B, C, spatial...)
  std::vector<torch::Tensor> valid;  // per tile, (input spatial...)
};

Batch read_batch(const ImageSource& source, const Normalization& norm, const TileGrid& grid,
                 const std::vector<int64_t>& indices) {
  Batch b;
  std::vector<torch::Tensor> inputs;
  for (int64_t i : indices) {
    b.tiles.push_back(grid.tile(i));
    Window w = read_window(source, b.tiles.back().input, norm);
    inputs.push_back(w.values);
    b.valid.push_back(w.valid);
  }
  b.input = torch::stack(inputs);
  return b;
}

// Crops the kept inset out of a tensor whose trailing axes cover `covered` in image
// coordinates (either the tile's output box or, for `same` networks, its input box).
torch::Tensor crop_inset(torch::Tensor t, const Box& covered, const Box& inset) {
  const int64_t lead = t.dim() - covered.dims();
  for (int a = 0; a < covered.dims(); ++a)
    t = t.narrow(lead + a, inset.origin[a] - covered.origin[a], inset.size[a]);
  return t;
}

}  // namespace

void check_bands(const ImageSource& source, const UNetOptions& model) {
  if (source.info().channels != model.in_channels)
    throw Error(source.info().path + ": has " + std::to_string(source.info().channels) + " bands but the model expects " +
                std::to_string(model.in_channels));
}

void InferenceOptions::validate(const UNetOptions& model) const {
  const int64_t a = unet_alignment(model);
  if (tile <= 0 || tile % a != 0)
    throw Error("--tile " + std::to_string(tile) + ": must be a positive multiple of " + std::to_string(a) +
                " for this model (" + std::to_string(model.levels) + " levels); try " +
                std::to_string(std::max<int64_t>(a, (tile / a) * a)));
  if (batch < 1) throw Error("--batch " + std::to_string(batch) + ": must be >= 1");
  if (strip < 0) throw Error("strip " + std::to_string(strip) + ": must be >= 0 (0: tiles)");
  if (columns < 1) throw Error("columns " + std::to_string(columns) + ": must be >= 1");
  if (groups < 1) throw Error("groups " + std::to_string(groups) + ": must be >= 1");
  if (band < 0 || band % a != 0)
    throw Error("band " + std::to_string(band) + ": must be 0 (the whole image) or a positive multiple of " +
                std::to_string(a) + " rows for this model");
}

std::vector<Box> work_insets(const UNetOptions& model, const Index& extent, const InferenceOptions& options) {
  std::vector<Box> insets;
  if (options.strip == 0) {
    const TileGrid grid = make_tile_grid(model, extent, options.tile);
    for (int64_t i = 0; i < grid.size(); ++i) insets.push_back(grid.tile(i).inset);
    return insets;
  }
  // Bands of rows, each cut into its column groups (streamed one after another, or by any rank).
  const int64_t rows = options.band > 0 ? options.band : extent[0];
  const std::vector<int64_t> groups = group_widths(model, extent, options.groups);
  for (int64_t first = 0; first < extent[0]; first += rows) {
    int64_t column = 0;
    for (int64_t width : groups) {
      Box b{Index(extent.size(), 0), extent};
      b.origin[0] = first;
      b.size[0] = std::min(rows, extent[0] - first);
      b.origin[1] = column;
      b.size[1] = width;
      insets.push_back(b);
      column += width;
    }
  }
  return insets;
}

TileGrid make_tile_grid(const UNetOptions& model, const Index& extent, int64_t tile) {
  if (static_cast<int>(extent.size()) != model.dims)
    throw Error("model is " + std::to_string(model.dims) + "-D but the image has " + std::to_string(extent.size()) +
                " axes");
  return TileGrid(TileGridOptions(extent)
                      .with_step(tile)
                      .with_remainder(unet_remainder(model))
                      .with_halo(unet_halo(model))
                      .with_alignment(unet_alignment(model)));
}

InferenceReport for_each_tile(UNet& net, const ImageSource& source, const Normalization& norm,
                              const InferenceOptions& options, const TileCallback& fn, const TileQueue& queue) {
  if (options.sliding) {
    TESSERA_CHECK(!queue);
    return for_each_window(net, source, norm, options, fn);
  }
  if (options.strip > 0) return for_each_strip(net, source, norm, options, fn, queue);
  const UNetOptions& model = net->options();
  options.validate(model);
  check_bands(source, model);
  const TileGrid grid = make_tile_grid(model, source.info().extent, options.tile);
  net->eval();
  net->use_channels_last();
  const torch::Device device = net->device();  // batches are read on the host, run where the weights are
  c10::InferenceMode guard;
  const auto start = std::chrono::steady_clock::now();
  ProgressBar bar("infer", grid.size(), "tiles", options.progress);

  // Tile indices are taken on this thread; only the reading runs ahead on the worker.
  int64_t sequential = 0;
  auto take = [&] {
    std::vector<int64_t> indices;
    while (static_cast<int64_t>(indices.size()) < options.batch) {
      const int64_t i = queue ? queue() : (sequential < grid.size() ? sequential++ : -1);
      if (i < 0) break;
      TESSERA_CHECK(i < grid.size());
      indices.push_back(i);
    }
    return indices;
  };
  auto fetch = [&](std::vector<int64_t> indices) { return read_batch(source, norm, grid, indices); };
  std::vector<int64_t> indices = take();
  std::future<Batch> next;
  if (options.prefetch && !indices.empty()) next = std::async(std::launch::async, fetch, indices);
  int64_t done = 0;
  while (!indices.empty()) {
    Batch batch = options.prefetch ? next.get() : fetch(indices);
    indices = take();
    if (options.prefetch && !indices.empty()) next = std::async(std::launch::async, fetch, indices);
    const torch::Tensor input = batch.input.to(device);
    torch::Tensor logits = options.forward ? options.forward(net, input) : net->forward(input);
    TESSERA_CHECK(logits.dim() == input.dim() && logits.size(0) == input.size(0));
    for (size_t k = 0; k < batch.tiles.size(); ++k) {
      const Tile& t = batch.tiles[k];
      // Valid networks cover the output box; `same` networks cover the whole input box.
      const Box covered = logits.size(2) == t.output.size[0] ? t.output : t.input;
      TESSERA_CHECK(logits.size(2) == covered.size[0]);
      fn(t, crop_inset(logits[k], covered, t.inset), crop_inset(batch.valid[k].to(device), t.input, t.inset));
    }
    done += static_cast<int64_t>(batch.tiles.size());
    bar.update(done);
  }
  bar.finish();

  InferenceReport report;
  report.tiles = done;
  report.pixels = 1;
  for (int64_t n : source.info().extent) report.pixels *= n;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.useful_gflops = unet_flops_per_output_pixel(model) * double(report.pixels) / 1e9;
  report.overhead = grid.overhead();
  report.recompute = tile_recompute(model, source.info().extent, options.tile) * double(done) / double(grid.size());
  return report;
}

InferenceReport infer_labels(UNet& net, const ImageSource& source, const Normalization& norm, LabelSink& sink,
                             const InferenceOptions& options) {
  return for_each_tile(net, source, norm, options,
                       [&](const Tile& t, const torch::Tensor& logits, const torch::Tensor& valid) {
                         auto labels = logits.argmax(0).to(torch::kUInt8).masked_fill_(valid.logical_not(),
                                                                                      int64_t{kNoDataLabel}).cpu();
                         sink.write(t.inset, to_block_u8(labels));
                       });
}

torch::Tensor infer_logits(UNet& net, const ImageSource& source, const Normalization& norm,
                           const InferenceOptions& options) {
  std::vector<int64_t> shape{net->options().classes};
  for (int64_t n : source.info().extent) shape.push_back(n);
  torch::Tensor out = torch::full(shape, std::numeric_limits<float>::quiet_NaN());
  for_each_tile(net, source, norm, options, [&](const Tile& t, const torch::Tensor& logits, const torch::Tensor&) {
    crop_inset(out, Box{Index(t.inset.dims(), 0), source.info().extent}, t.inset).copy_(logits);
  });
  return out;
}

}  // namespace tessera
