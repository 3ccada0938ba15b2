// for_each_strip (inference.hpp): the streamed loop. Strips of input rows are read from the
// image (the next one on a background thread while the network runs), pushed through one
// StreamExecutor, and the image rows they finish handed to the caller with their valid mask,
// which waits in a small row buffer for its logits (the network's output lags its input by ε
// rows and the carried rows).
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
  Box box;  // in image coordinates: frame rows [first, first + rows) start at image row −ε
  Window window;
};

// The valid masks of image rows read but not yet handed out, rows [first, first + rows).
struct ValidRows {
  torch::Tensor rows;
  int64_t first = 0;

  // Keeps the image pixels of a strip's window (its rows inside the image, cropped across).
  void add(const Strip& s, const Index& extent, int64_t halo) {
    torch::Tensor v = s.window.valid;
    for (int64_t a = 1; a < v.dim(); ++a) v = v.narrow(a, halo, extent[static_cast<size_t>(a)]);
    const int64_t lo = std::max<int64_t>(0, -s.box.origin[0]);
    const int64_t hi = std::min(s.box.size[0], extent[0] - s.box.origin[0]);
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

}  // namespace

InferenceReport for_each_strip(UNet& net, const ImageSource& source, const Normalization& norm,
                               const InferenceOptions& options, const TileCallback& fn) {
  const UNetOptions& model = net->options();
  TESSERA_CHECK(options.strip > 0);
  check_bands(source, model);
  if (auto why = stream_refusal(model)) throw Error("--mode stream: " + *why + "; use --mode tile");
  const Index& extent = source.info().extent;
  if (static_cast<int>(extent.size()) != model.dims)
    throw Error("model is " + std::to_string(model.dims) + "-D but the image has " + std::to_string(extent.size()) +
                " axes");
  const Index whole = unet_whole_input(model, extent);
  const int64_t halo = unet_halo(model);
  net->eval();
  net->use_channels_last();
  c10::InferenceMode guard;
  StreamExecutor executor(net);
  const auto start = std::chrono::steady_clock::now();
  const int64_t strips_total = (whole[0] + options.strip - 1) / options.strip;
  ProgressBar bar("infer", strips_total, "strips", options.progress);

  auto read = [&](int64_t first) {
    Strip s;
    s.box.origin = Index(extent.size(), -halo);
    s.box.origin[0] = first - halo;
    s.box.size = whole;
    s.box.size[0] = std::min(options.strip, whole[0] - first);
    s.window = read_window(source, s.box, norm);
    return s;
  };
  std::future<Strip> next = std::async(options.prefetch ? std::launch::async : std::launch::deferred, read, 0);
  ValidRows valid;
  int64_t fed = 0, finished = 0, strips = 0;
  while (finished < extent[0]) {
    TESSERA_CHECK(fed < whole[0]);
    const Strip strip = next.get();
    fed += strip.box.size[0];
    if (fed < whole[0]) next = std::async(options.prefetch ? std::launch::async : std::launch::deferred, read, fed);
    valid.add(strip, extent, halo);
    const torch::Tensor out = executor.push(strip.window.values.unsqueeze(0));
    ++strips;
    bar.update(strips);
    if (!out.defined()) continue;
    const int64_t n = std::min(out.size(2), extent[0] - finished);
    torch::Tensor logits = out[0].narrow(1, 0, n).to(torch::kFloat);
    for (size_t a = 1; a < extent.size(); ++a) logits = logits.narrow(static_cast<int64_t>(a) + 1, 0, extent[a]);
    Tile t;
    t.index = strips - 1;
    t.input = strip.box;
    t.output.origin = Index(extent.size(), 0);
    t.output.origin[0] = finished;
    t.output.size = extent;
    t.output.size[0] = n;
    t.inset = t.output;
    fn(t, logits, valid.take(finished, n));
    finished += n;
  }
  bar.finish();

  InferenceReport report;
  report.tiles = strips;
  report.pixels = 1;
  for (int64_t n : extent) report.pixels *= n;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.useful_gflops = unet_flops_per_output_pixel(model) * double(report.pixels) / 1e9;
  double read_pixels = double(fed);
  for (size_t a = 1; a < whole.size(); ++a) read_pixels *= double(whole[a]);
  report.overhead = read_pixels / double(report.pixels);
  report.recompute = executor.flops() / box_layer_sequence(model, whole).flops();
  report.held_bytes = executor.peak_held_bytes();
  return report;
}

}  // namespace tessera
