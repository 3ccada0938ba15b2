// for_each_window (inference.hpp): sliding windows of the training size, blended with Gaussian
// weights (sliding_window.hpp). Windows run in rows along the first axis; the weighted logits
// and the weights are summed into a band of image rows as deep as one window, and the rows no
// later window reaches are handed out as they become final, so memory is bounded by a band
// across the image, not by the image.
#include <chrono>

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/tensor_io.hpp"

namespace tessera {
namespace {

// The window's weight (output sides...): the outer product of the per-axis Gaussian profiles.
torch::Tensor gaussian_weight(const Index& out, double sigma_scale) {
  torch::Tensor w;
  for (int64_t side : out) {
    const std::vector<double> p = gaussian_profile(side, sigma_scale);
    const torch::Tensor axis = torch::tensor(p, torch::kDouble).to(torch::kFloat);
    w = w.defined() ? w.unsqueeze(-1) * axis : axis;
  }
  return w;
}

// The logits of a batch of windows, averaged over the mirrored copies with `mirror` (every
// subset of the spatial axes flipped, run, flipped back).
torch::Tensor run_windows(UNet& net, const torch::Tensor& x, const InferenceOptions& o) {
  auto forward = [&](const torch::Tensor& in) {
    return (o.forward ? o.forward(net, in) : net->forward(in)).to(torch::kFloat);
  };
  if (!o.sliding->mirror) return forward(x);
  const int d = static_cast<int>(x.dim()) - 2;
  torch::Tensor sum;
  for (int m = 0; m < (1 << d); ++m) {
    std::vector<int64_t> axes;
    for (int a = 0; a < d; ++a)
      if (m & (1 << a)) axes.push_back(a + 2);
    const torch::Tensor y = axes.empty() ? forward(x) : forward(x.flip(axes)).flip(axes);
    sum = sum.defined() ? sum + y : y;
  }
  return sum / double(1 << d);
}

// Image rows [first, first + depth) across the whole image: the weighted logits summed, the
// weights summed, and which pixels had data.
struct Band {
  torch::Tensor sum, weight, valid;  // (C, depth, sides...), (depth, sides...), bool (depth, sides...)
  int64_t first = 0;
  int64_t handed = 0;  // bands handed out (their Tile index)

  Band(int64_t classes, int64_t depth, const Index& extent, torch::Device device) {
    std::vector<int64_t> shape{depth};
    shape.insert(shape.end(), extent.begin() + 1, extent.end());
    weight = torch::zeros(shape, torch::TensorOptions().device(device));
    valid = torch::zeros(shape, torch::TensorOptions().dtype(torch::kBool).device(device));
    shape.insert(shape.begin(), classes);
    sum = torch::zeros(shape, torch::TensorOptions().device(device));
  }

  // Hands out the band's first `rows` rows (final: no later window reaches them).
  void hand_out(int64_t rows, const Index& extent, const TileCallback& fn) {
    if (rows <= 0) return;
    Tile t;
    t.index = handed++;
    t.inset = Box{Index(extent.size(), 0), extent};
    t.inset.origin[0] = first;
    t.inset.size[0] = rows;
    t.output = t.input = t.inset;
    const torch::Tensor w = weight.narrow(0, 0, rows).clamp_min(1e-12f);
    fn(t, sum.narrow(1, 0, rows) / w.unsqueeze(0), valid.narrow(0, 0, rows));
  }

  // Moves the band to start at image row `start`: the rows before it are handed out, the
  // rows it shares with the old band kept.
  void move_to(int64_t start, const Index& extent, const TileCallback& fn) {
    const int64_t depth = weight.size(0), gone = start - first;
    if (gone <= 0) return;
    hand_out(std::min(gone, extent[0] - first), extent, fn);
    const int64_t kept = std::max<int64_t>(0, depth - gone);
    auto shifted = [&](const torch::Tensor& t, int64_t axis) {
      torch::Tensor n = torch::zeros_like(t);
      if (kept > 0) n.narrow(axis, 0, kept).copy_(t.narrow(axis, gone, kept));
      return n;
    };
    sum = shifted(sum, 1);
    weight = shifted(weight, 0);
    valid = shifted(valid, 0);
    first = start;
  }

  // Adds one window's logits (C, out...) under `gaussian` at output origin `at` (at[0] = first).
  void add(const torch::Tensor& logits, const torch::Tensor& gaussian, const torch::Tensor& window_valid,
           const Index& at, const Index& extent) {
    torch::Tensor l = logits * gaussian.unsqueeze(0), g = gaussian, v = window_valid;
    torch::Tensor s = sum, w = weight, b = valid;
    for (int64_t a = 0; a < static_cast<int64_t>(extent.size()); ++a) {
      const int64_t n = a == 0 ? g.size(0) : std::min(g.size(a), extent[a] - at[a]);
      const int64_t o = a == 0 ? 0 : at[a];
      l = l.narrow(a + 1, 0, n);
      g = g.narrow(a, 0, n);
      v = v.narrow(a, 0, n);
      s = s.narrow(a + 1, o, n);
      w = w.narrow(a, o, n);
      b = b.narrow(a, o, n);
    }
    s.add_(l);
    w.add_(g);
    b.logical_or_(v);
  }
};

// Every combination of the window origins along axes 1…d−1 (axis 0's slot left 0).
std::vector<Index> origins_across(const std::vector<std::vector<int64_t>>& starts) {
  std::vector<Index> all{Index(starts.size(), 0)};
  for (size_t a = 1; a < starts.size(); ++a) {
    std::vector<Index> next;
    for (const Index& o : all)
      for (int64_t s : starts[a]) {
        Index n = o;
        n[a] = s;
        next.push_back(n);
      }
    all = std::move(next);
  }
  return all;
}

InferenceReport window_report(const UNetOptions& model, const Index& extent, const SlidingWindowOptions& so,
                              const Index& out, int64_t windows, std::chrono::steady_clock::time_point start) {
  InferenceReport r;
  r.tiles = windows;
  r.pixels = 1;
  double read = double(windows), computed = double(windows);
  for (size_t a = 0; a < extent.size(); ++a) {
    r.pixels *= extent[a];
    read *= double(so.window[a]);
    computed *= double(out[a]);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.useful_gflops = unet_flops_per_output_pixel(model) * double(r.pixels) / 1e9;
  r.overhead = read / double(r.pixels);
  r.recompute = computed * (so.mirror ? double(1 << extent.size()) : 1.0) / double(r.pixels);
  return r;
}

}  // namespace

InferenceReport for_each_window(UNet& net, const ImageSource& source, const Normalization& norm,
                                const InferenceOptions& options, const TileCallback& fn) {
  TESSERA_CHECK(options.sliding);
  const UNetOptions& model = net->options();
  const SlidingWindowOptions& so = *options.sliding;
  so.validate(model);
  check_bands(source, model);
  const Index& extent = source.info().extent;
  if (static_cast<int>(extent.size()) != model.dims)
    throw Error("model is " + std::to_string(model.dims) + "-D but the image has " + std::to_string(extent.size()) +
                " axes");
  if (options.batch < 1) throw Error("--batch " + std::to_string(options.batch) + ": must be >= 1");
  const Index out = window_output_sides(model, so.window);
  const int d = model.dims;
  std::vector<std::vector<int64_t>> starts(d);
  for (int a = 0; a < d; ++a) starts[a] = window_starts(extent[a], out[a], so.overlap, unet_alignment(model));
  const std::vector<Index> across = origins_across(starts);
  net->eval();
  net->use_channels_last();
  const torch::Device device = net->device();
  c10::InferenceMode guard;
  const auto start = std::chrono::steady_clock::now();
  const torch::Tensor gaussian = gaussian_weight(out, so.sigma_scale).to(device);
  Band band(model.classes, out[0], extent, device);
  const int64_t total = static_cast<int64_t>(starts[0].size() * across.size());
  ProgressBar bar("infer", total, "windows", options.progress);
  int64_t done = 0;
  for (int64_t row : starts[0]) {
    band.move_to(row, extent, fn);
    for (size_t first = 0; first < across.size(); first += static_cast<size_t>(options.batch)) {
      const size_t n = std::min(across.size() - first, static_cast<size_t>(options.batch));
      std::vector<torch::Tensor> inputs, valids;
      for (size_t k = 0; k < n; ++k) {
        Box box{across[first + k], so.window};
        box.origin[0] = row;
        for (int a = 0; a < d; ++a) box.origin[a] -= (so.window[a] - out[a]) / 2;  // a valid network's halo
        Window w = read_window(source, box, norm);
        inputs.push_back(w.values);
        torch::Tensor v = w.valid;
        for (int a = 0; a < d; ++a) v = v.narrow(a, (so.window[a] - out[a]) / 2, out[a]);
        valids.push_back(v.to(device));
      }
      const torch::Tensor logits = run_windows(net, torch::stack(inputs).to(device), options);
      TESSERA_CHECK(logits.dim() == d + 2 && logits.size(2) == out[0]);
      for (size_t k = 0; k < n; ++k) {
        Index at = across[first + k];
        at[0] = row;
        band.add(logits[static_cast<int64_t>(k)], gaussian, valids[k], at, extent);
      }
      done += static_cast<int64_t>(n);
      bar.update(done);
    }
  }
  band.hand_out(extent[0] - band.first, extent, fn);
  bar.finish();
  return window_report(model, extent, so, out, done, start);
}

}  // namespace tessera
