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

#include <dlfcn.h>

#include <torch/torch.h>

#include "tessera/run/process_memory.hpp"
#include "tessera/core/cpu_tensor_cache.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/stream_executor.hpp"
#include "tessera/core/tensor_io.hpp"
#include "tessera/core/tile_choice.hpp"

namespace tessera {
namespace {

// Buffers from kStreamMmapThreshold up are mapped on their own (glibc's mmap threshold, fixed:
// glibc otherwise raises it to each mapped buffer freed, up to 32 MiB, and serves later ones from
// the heap, which keeps their pages once freed). The tensor cache (cpu_tensor_cache.hpp) keeps
// LibTorch's buffers from kStreamCacheFloor up while a stream runs and reuses them from strip to
// strip: a stream's row buffers are mostly between 64 KiB and 1 MiB (a row of 16 channels 2048
// wide is 128 KiB), and from the heap their freed chunks fragment it over a few hundred strips.
// The threshold itself stays at 1 MiB: at 64 KiB the buffers LibTorch's allocator does not see
// (oneDNN's, GDAL's blocks) are mapped afresh every strip, 20 MiB less peak for up to 2 s more
// kernel time at 4096² (docs/streaming.md). Process-wide, from the first stream on.
constexpr int64_t kStreamMmapThreshold = int64_t{1} << 20;
constexpr int64_t kStreamCacheFloor = int64_t{64} << 10;

// oneDNN's primitive cache keeps every convolution it has built (up to 1024 of them), each
// with its JIT kernels (unet-tiny's brgemm convolutions: about 0.7 MiB each). A stream's steady
// strips build one per layer and reuse it; its first strips (the pipeline filling: no carried
// rows yet, rows reaching the deep levels one at a time) and its last, shorter one build
// others, each used once. While those run the cache holds nothing (capacity 0), so they are
// freed after use: 29 convolutions kept against 18, 7 MiB less peak RSS at 4096²
// (docs/streaming.md). Through oneDNN's C API looked up at run time: Debian's LibTorch links
// the shared libdnnl; where oneDNN is built into LibTorch with its symbols hidden (PyTorch's
// wheels) it is not found and nothing changes.
class OneDnnPrimitiveCache {
 public:
  OneDnnPrimitiveCache()
      : get_(reinterpret_cast<int (*)(int*)>(dlsym(RTLD_DEFAULT, "dnnl_get_primitive_cache_capacity"))),
        set_(reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "dnnl_set_primitive_cache_capacity"))) {
    if (!get_ || !set_ || get_(&capacity_) != 0) set_ = nullptr;
  }
  ~OneDnnPrimitiveCache() { keep(true); }
  OneDnnPrimitiveCache(const OneDnnPrimitiveCache&) = delete;
  OneDnnPrimitiveCache& operator=(const OneDnnPrimitiveCache&) = delete;

  /// Whether the primitives built from now on are kept (the steady strips) or not.
  void keep(bool on) {
    if (set_ && on != kept_) set_(on ? capacity_ : 0);
    kept_ = on;
  }

 private:
  int (*get_)(int*);
  int (*set_)(int);
  int capacity_ = 0;
  bool kept_ = true;
};

// Column pieces run side by side, each on its share of the intra-op threads while it lives.
class ThreadShare {
 public:
  explicit ThreadShare(int64_t pieces) : threads_(at::get_num_threads()) {
    at::set_num_threads(std::max(1, threads_ / int(std::max<int64_t>(1, pieces))));
  }
  ~ThreadShare() { at::set_num_threads(threads_); }
  ThreadShare(const ThreadShare&) = delete;
  ThreadShare& operator=(const ThreadShare&) = delete;

 private:
  int threads_;
};

// One column piece of a band (cut along the second spatial axis: columns in 2-D, the rows of
// each slice in 3-D): output columns [first, first + width) of the image, streamed through its
// own executor over its own padded input (unet_whole_input of the band's rows × its width),
// read from column first − ε. Its first column is on the pooling grid, so its columns are
// those of one pass over the whole image (exact tiling's rule); it recomputes the ε columns
// either side it shares with its neighbours.
struct Piece {
  int64_t first = 0, width = 0;
  Index whole;
};

// The band's rows [first, first + rows) of its frame, read for every piece.
struct Strip {
  Box box;                      // of the first piece; every piece reads these rows
  std::vector<Window> windows;  // by piece
};

// The valid masks of the band's rows read but not yet handed out, rows [first, first + rows).
struct ValidRows {
  torch::Tensor rows;
  int64_t first = 0;

  // Keeps the band's pixels of a strip (its rows inside the band; `valid` already cropped across).
  void add(const Box& strip, const torch::Tensor& valid, const Box& band) {
    const int64_t lo = std::max<int64_t>(0, band.origin[0] - strip.origin[0]);
    const int64_t hi = std::min(strip.size[0], band.origin[0] + band.size[0] - strip.origin[0]);
    if (hi <= lo) return;
    const torch::Tensor v = valid.narrow(0, lo, hi - lo);
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
  double read_pixels = 0;  // input pixels read, halo rows and columns included
  double flops = 0;
  int64_t peak_held_bytes = 0;
};

// The band's column pieces (column_widths).
std::vector<Piece> band_pieces(const UNetOptions& model, const Box& band, int64_t count) {
  std::vector<Piece> pieces;
  int64_t first = 0;
  for (int64_t width : column_widths(model, band.size, count)) {
    Piece p;
    p.first = first;
    p.width = width;
    Index sides = band.size;
    sides[1] = width;
    p.whole = unet_whole_input(model, sides);
    pieces.push_back(p);
    first += width;
  }
  return pieces;
}

// The pieces' valid masks of a strip, cropped across to the band's pixels and joined along
// the second axis.
torch::Tensor valid_across(const Strip& s, const std::vector<Piece>& pieces, const Box& band, int64_t halo) {
  std::vector<torch::Tensor> parts;
  for (size_t k = 0; k < pieces.size(); ++k) {
    torch::Tensor v = s.windows[k].valid.narrow(1, halo, pieces[k].width);
    for (int64_t a = 2; a < v.dim(); ++a) v = v.narrow(a, halo, band.size[static_cast<size_t>(a)]);
    parts.push_back(v);
  }
  return parts.size() == 1 ? parts.front() : torch::cat(parts, 1);
}

// Every piece's strip pushed through its executor, pieces but the last on worker threads
// (each with `threads` intra-op threads), the last on this one; their output rows joined
// across (every piece finishes the same rows: rows depend on the rows fed, not the width).
torch::Tensor push_pieces(std::vector<StreamExecutor>& executors, const Strip& s, const std::vector<Piece>& pieces,
                          int threads) {
  auto push = [&](size_t k) {
    const torch::Tensor out = executors[k].push(s.windows[k].values.unsqueeze(0));
    return out.defined() && pieces.size() > 1 ? out.narrow(3, 0, pieces[k].width) : out;
  };
  std::vector<std::future<torch::Tensor>> others;
  for (size_t k = 0; k + 1 < pieces.size(); ++k)
    others.push_back(std::async(std::launch::async, [&, k] {
      at::set_num_threads(threads);  // this thread's OpenMP team; the value every stream thread shares
      c10::InferenceMode guard;
      return push(k);
    }));
  std::vector<torch::Tensor> outs(pieces.size());
  outs.back() = push(pieces.size() - 1);
  for (size_t k = 0; k < others.size(); ++k) outs[k] = others[k].get();
  if (!outs.front().defined() || outs.size() == 1) return outs.front();
  return torch::cat(outs, 3);
}

// Streams band `index` (`band`: its rows across its column group, work_insets) through a fresh
// executor per column piece.
BandRun stream_band(UNet& net, const ImageSource& source, const Normalization& norm, const InferenceOptions& options,
                    int64_t index, const Box& band, const TileCallback& fn, const std::function<void()>& on_strip) {
  const UNetOptions& model = net->options();
  const std::vector<Piece> pieces = band_pieces(model, band, options.columns);
  const int64_t halo = unet_halo(model), height = pieces.front().whole[0];
  std::vector<StreamExecutor> executors;
  executors.reserve(pieces.size());
  for (size_t k = 0; k < pieces.size(); ++k) executors.emplace_back(net);
  const int threads = at::get_num_threads();  // each piece's share (for_each_strip set it)
  OneDnnPrimitiveCache primitives;
  auto read = [&](int64_t first) {
    Strip s;
    for (const Piece& p : pieces) {
      Box box;
      box.origin = Index(band.size.size(), -halo);
      box.origin[0] = band.origin[0] + first - halo;
      box.origin[1] = band.origin[1] + p.first - halo;
      box.size = p.whole;
      box.size[0] = std::min(options.strip, height - first);
      if (s.windows.empty()) s.box = box;
      s.windows.push_back(read_window(source, box, norm));
    }
    return s;
  };
  const auto policy = options.prefetch ? std::launch::async : std::launch::deferred;
  std::future<Strip> next = std::async(policy, read, 0);
  ValidRows valid;
  valid.first = band.origin[0];
  int64_t fed = 0, finished = 0;  // input rows of the band's frame, output rows of the band
  bool steady = false;
  BandRun run;
  while (finished < band.size[0]) {
    TESSERA_CHECK(fed < height);
    const Strip strip = next.get();
    fed += strip.box.size[0];
    if (fed < height) next = std::async(policy, read, fed);
    valid.add(strip.box, valid_across(strip, pieces, band, halo), band);
    // Steady once a strip has come out whole: every layer then ran on its carried rows.
    primitives.keep(steady && fed < height);
    const torch::Tensor out = push_pieces(executors, strip, pieces, threads);
    steady = out.defined() && out.size(2) == strip.box.size[0];
    int64_t held = 0;
    for (const StreamExecutor& e : executors) held += e.held_bytes();
    run.peak_held_bytes = std::max(run.peak_held_bytes, held);
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
  for (size_t k = 0; k < pieces.size(); ++k) {
    double pixels = double(fed);
    for (size_t a = 1; a < pieces[k].whole.size(); ++a) pixels *= double(pieces[k].whole[a]);
    run.read_pixels += pixels;
    run.flops += executors[k].flops();
  }
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
  for (const Box& b : bands) strips_total += (unet_whole_input(model, b.size)[0] + options.strip - 1) / options.strip;
  ProgressBar bar("infer", strips_total, "strips", options.progress);
  const ThreadShare share(options.columns);
  // The strips' buffers come and go; mapped and cached, they are reused instead of staying in
  // the heap (4096 × 512, 56-row strips: 394 against 496 MiB peak RSS, docs/streaming.md).
  fix_mmap_threshold(kStreamMmapThreshold);
  const CpuTensorCacheStreaming cache_policy(kStreamCacheFloor);
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
