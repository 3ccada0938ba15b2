// for_each_strip (inference.hpp): the streamed loop. Each band (the whole image, or a band of
// rows a sample-parallel rank took) streams on its own: strips of input rows are read from the
// image (the next one on a background thread while the network runs), pushed through one
// StreamExecutor, and the band's rows they finish handed to the caller with their valid mask,
// which waits in a small row buffer for its logits (the network's output lags its input by ε
// rows and the carried rows). A band starts ε rows above its first row, on the pooling grid,
// so its rows are those of one pass over the whole image; it re-reads (and recomputes) that
// halo once, and the rows below its last.
#include <chrono>
#include <future>

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/stream_executor.hpp"
#include "tessera/core/tensor_io.hpp"

namespace tessera {
namespace {

struct Strip {
  Box box;  // in image coordinates: frame rows [first, first + rows) start at the band's row −ε
  Window window;
};

// The valid masks of the band's rows read but not yet handed out, rows [first, first + rows).
struct ValidRows {
  torch::Tensor rows;
  int64_t first = 0;

  // Keeps the band's pixels of a strip's window (its rows inside the band, cropped across).
  void add(const Strip& s, const Box& band, int64_t halo) {
    torch::Tensor v = s.window.valid;
    for (int64_t a = 1; a < v.dim(); ++a) v = v.narrow(a, halo, band.size[static_cast<size_t>(a)]);
    const int64_t lo = std::max<int64_t>(0, band.origin[0] - s.box.origin[0]);
    const int64_t hi = std::min(s.box.size[0], band.origin[0] + band.size[0] - s.box.origin[0]);
    if (hi <= lo) return;
    v = v.narrow(0, lo, hi - lo);
    rows = rows.defined() ? torch::cat({rows, v}, 0) : v;
  }
  torch::Tensor take(int64_t from, int64_t count) {
    torch::Tensor t = rows.narrow(0, from - first, count);
    rows = rows.narrow(0, from - first + count, rows.size(0) - (from - first + count)).clone();
    first = from + count;
    return t;
  }
};

// What streaming one band ran.
struct BandRun {
  int64_t strips = 0;
  double read_pixels = 0;  // input pixels read, halo rows included
  double flops = 0;
  int64_t peak_held_bytes = 0;
};

// The band's padded input: rows from its first row − ε, as tall as one pass over the band
// needs, as wide as one pass over the whole image.
Index band_input(const UNetOptions& model, const Box& band) { return unet_whole_input(model, band.size); }

// Streams band `index` (`band`: its rows across the whole image) through a fresh executor.
BandRun stream_band(UNet& net, const ImageSource& source, const Normalization& norm, const InferenceOptions& options,
                    int64_t index, const Box& band, const TileCallback& fn, const std::function<void()>& on_strip) {
  const UNetOptions& model = net->options();
  const Index whole = band_input(model, band);
  const int64_t halo = unet_halo(model);
  StreamExecutor executor(net);
  auto read = [&](int64_t first) {
    Strip s;
    s.box.origin = Index(band.size.size(), -halo);
    s.box.origin[0] = band.origin[0] + first - halo;
    s.box.size = whole;
    s.box.size[0] = std::min(options.strip, whole[0] - first);
    s.window = read_window(source, s.box, norm);
    return s;
  };
  const auto policy = options.prefetch ? std::launch::async : std::launch::deferred;
  std::future<Strip> next = std::async(policy, read, 0);
  ValidRows valid;
  valid.first = band.origin[0];
  int64_t fed = 0, finished = 0;  // input rows of the band's frame, output rows of the band
  BandRun run;
  while (finished < band.size[0]) {
    TESSERA_CHECK(fed < whole[0]);
    const Strip strip = next.get();
    fed += strip.box.size[0];
    if (fed < whole[0]) next = std::async(policy, read, fed);
    valid.add(strip, band, halo);
    const torch::Tensor out = executor.push(strip.window.values.unsqueeze(0));
    ++run.strips;
    on_strip();
    if (!out.defined()) continue;
    const int64_t n = std::min(out.size(2), band.size[0] - finished);
    torch::Tensor logits = out[0].narrow(1, 0, n).to(torch::kFloat);
    for (size_t a = 1; a < band.size.size(); ++a)
      logits = logits.narrow(static_cast<int64_t>(a) + 1, 0, band.size[a]);
    Tile t;
    t.index = index;
    t.input = strip.box;
    t.output = band;
    t.output.origin[0] = band.origin[0] + finished;
    t.output.size[0] = n;
    t.inset = t.output;
    fn(t, logits, valid.take(t.inset.origin[0], n));
    finished += n;
  }
  run.read_pixels = double(fed);
  for (size_t a = 1; a < whole.size(); ++a) run.read_pixels *= double(whole[a]);
  run.flops = executor.flops();
  run.peak_held_bytes = executor.peak_held_bytes();
  return run;
}

}  // namespace

InferenceReport for_each_strip(UNet& net, const ImageSource& source, const Normalization& norm,
                               const InferenceOptions& options, const TileCallback& fn, const TileQueue& queue) {
  const UNetOptions& model = net->options();
  TESSERA_CHECK(options.strip > 0);
  options.validate(model);
  check_bands(source, model);
  if (auto why = stream_refusal(model)) throw Error("--mode stream: " + *why + "; use --mode tile");
  const Index& extent = source.info().extent;
  if (static_cast<int>(extent.size()) != model.dims)
    throw Error("model is " + std::to_string(model.dims) + "-D but the image has " + std::to_string(extent.size()) +
                " axes");
  const std::vector<Box> bands = work_insets(model, extent, options);
  net->eval();
  net->use_channels_last();
  c10::InferenceMode guard;
  const auto start = std::chrono::steady_clock::now();
  int64_t strips_total = 0;
  for (const Box& b : bands) strips_total += (band_input(model, b)[0] + options.strip - 1) / options.strip;
  ProgressBar bar("infer", strips_total, "strips", options.progress);
  InferenceReport report;
  double flops = 0, read_pixels = 0;
  int64_t sequential = 0;
  for (;;) {
    const int64_t i = queue ? queue() : (sequential < int64_t(bands.size()) ? sequential++ : -1);
    if (i < 0) break;
    TESSERA_CHECK(i < int64_t(bands.size()));
    const BandRun run = stream_band(net, source, norm, options, i, bands[static_cast<size_t>(i)], fn,
                                    [&] { bar.update(++report.tiles); });
    flops += run.flops;
    read_pixels += run.read_pixels;
    report.held_bytes = std::max(report.held_bytes, run.peak_held_bytes);
  }
  bar.finish();

  report.pixels = 1;
  for (int64_t n : extent) report.pixels *= n;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.useful_gflops = unet_flops_per_output_pixel(model) * double(report.pixels) / 1e9;
  report.overhead = read_pixels / double(report.pixels);
  report.recompute = flops / box_layer_sequence(model, unet_whole_input(model, extent)).flops();
  return report;
}

}  // namespace tessera
