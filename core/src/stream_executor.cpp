#include "tessera/core/stream_executor.hpp"

#include <algorithm>
#include <utility>

#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

torch::Tensor rows_of(const torch::Tensor& t, int64_t first, int64_t count) { return t.narrow(2, first, count); }

// `a` then `b` along the rows; either may be undefined (no rows).
torch::Tensor joined(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return torch::cat({a, b}, 2);
}

// The last `count` rows of t as a tensor of their own (a view would keep the whole strip
// alive), or undefined for none.
torch::Tensor last_rows(const torch::Tensor& t, int64_t count) {
  if (count <= 0) return {};
  return rows_of(t, t.size(2) - count, count).clone();
}

// Elements of one sample's spatial volume: the FLOPs of a layer are per output element.
double spatial_elements(const torch::Tensor& t) { return double(t.numel()) / double(t.size(1)); }

int64_t bytes_of(const torch::Tensor& t) { return t.defined() ? t.numel() * int64_t(t.element_size()) : 0; }

int64_t smallest_input(const UNetOptions& o) {
  int64_t side = 1;
  while (!unet_output_size(o, side)) ++side;
  return side;
}

}  // namespace

std::optional<std::string> stream_refusal(const UNetOptions& o) {
  if (!o.is_builtin()) return "model " + o.name + " is a registry model (only the built-in unet streams)";
  if (o.padding != Padding::kValid) return "padding is same (only valid convolutions stream exactly)";
  if (o.norm == Norm::kGroup || o.norm == Norm::kInstance)
    return "norm is " + to_string(o.norm) + " (statistics over the whole window)";
  return std::nullopt;
}

StreamExecutor::StreamExecutor(UNet& net) : net_(net) {
  if (auto why = stream_refusal(net->options())) throw Error("streaming: " + *why);
  seq_ = unet_layer_sequence(net->options(), smallest_input(net->options()));
  modules_ = find_layer_modules(*net, seq_, 0, seq_.size() - 1);
  carry_.resize(static_cast<size_t>(seq_.size()));
  placed_.resize(static_cast<size_t>(seq_.size()));
  consumed_.assign(static_cast<size_t>(seq_.size()), 0);
  skip_.resize(seq_.skips.size());
  for (const SkipEdge& e : seq_.skips) {
    // The concatenation's decoder input is the up-sampling step just before it.
    const int64_t crop = seq_.layers[static_cast<size_t>(e.producer)].out_side -
                         seq_.layers[static_cast<size_t>(e.consumer - 1)].out_side;
    TESSERA_CHECK(crop >= 0 && crop % 2 == 0);
    crop_.push_back(crop / 2);
  }
}

torch::Tensor StreamExecutor::push(const torch::Tensor& rows) {
  const UNetOptions& o = net_->options();
  TESSERA_CHECK(rows.dim() == o.dims + 2 && rows.size(1) == o.in_channels);
  rows_in_ += rows.size(2);
  // The strip goes straight into the first convolution's input, converted on the way.
  torch::Tensor x;
  if (feeds_convolution(-1)) {
    x = place(0, rows.sizes()).copy_(rows);
  } else {
    x = rows.to(net_->parameters().front().scalar_type());
    if (net_->channels_last())
      x = x.contiguous(o.dims == 2 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d);
  }
  for (int i = 0; i < seq_.size(); ++i) {
    x = step(i, std::move(x));
    keep_skip(i, x);
  }
  held_bytes_ = 0;
  for (const torch::Tensor& t : carry_) held_bytes_ += bytes_of(t);
  for (const SkipRows& k : skip_)
    for (const torch::Tensor& t : k.chunks) held_bytes_ += bytes_of(t);
  peak_held_bytes_ = std::max(peak_held_bytes_, held_bytes_);
  if (x.defined()) rows_out_ += x.size(2);
  return x;
}

torch::Tensor StreamExecutor::step(int i, torch::Tensor x) {
  const Layer& l = seq_.layers[static_cast<size_t>(i)];
  LayerModules& m = modules_[static_cast<size_t>(i)];
  switch (l.kind) {
    case LayerKind::kConv:
      return convolve(i, x, net_->options().kernel);
    case LayerKind::kHead:
      return convolve(i, x, 1);
    case LayerKind::kPool:
      return pool(i, x);
    case LayerKind::kConcat:
      return concat(i, x);
    default:
      break;
  }
  if (!x.defined()) return x;  // the row-wise layers: nothing in, nothing out
  switch (l.kind) {
    case LayerKind::kNorm:
      return m.norm->forward(x);
    case LayerKind::kActivation: {
      // Into the next convolution's input when one follows (relu and clamp_min are one kernel).
      if (!feeds_convolution(i)) return torch::relu_(x);
      torch::Tensor out = place(i + 1, x.sizes());
      return at::clamp_min_out(out, x, 0);
    }
    case LayerKind::kUp: {
      // Transposed 2^D stride 2: input row j gives output rows 2j, 2j + 1. Upsample decoder:
      // the 1×1 convolution, then nearest up-sampling, the same rows.
      torch::Tensor y = m.conv->forward(x);
      flops_ += 2.0 * double(x.size(1)) * double(y.numel());  // one tap per element it computes
      return net_->options().decoder == Decoder::kTransposed ? y : upsample_nearest2x(y);
    }
    default:
      TESSERA_CHECK(!"every layer kind is handled");
      return x;
  }
}

bool StreamExecutor::feeds_convolution(int i) const {
  if (i + 1 >= seq_.size()) return false;
  const Layer& next = seq_.layers[static_cast<size_t>(i + 1)];
  return next.kind == LayerKind::kConv && net_->options().kernel > 1;
}

torch::Tensor StreamExecutor::place(int i, c10::IntArrayRef sizes) {
  const torch::Tensor& carry = carry_[static_cast<size_t>(i)];
  const int64_t kept = carry.defined() ? carry.size(2) : 0;
  std::vector<int64_t> shape(sizes.begin(), sizes.end());
  shape[2] += kept;
  const UNetOptions& o = net_->options();
  auto options = torch::TensorOptions().dtype(net_->parameters().front().scalar_type());
  const auto format = !net_->channels_last() ? at::MemoryFormat::Contiguous
                      : o.dims == 2         ? at::MemoryFormat::ChannelsLast
                                            : at::MemoryFormat::ChannelsLast3d;
  torch::Tensor& in = placed_[static_cast<size_t>(i)];
  in = torch::empty(shape, options.memory_format(format));
  if (kept > 0) rows_of(in, 0, kept).copy_(carry);
  return rows_of(in, kept, sizes[2]);
}

torch::Tensor StreamExecutor::convolve(int i, const torch::Tensor& x, int64_t kernel) {
  torch::Tensor& carry = carry_[static_cast<size_t>(i)];
  // The rows arrive placed after the carried ones (place()) or, for the head, on their own.
  torch::Tensor in = std::exchange(placed_[static_cast<size_t>(i)], torch::Tensor());
  if (!in.defined()) in = joined(carry, x);
  if (!in.defined()) return {};
  const int64_t out_rows = in.size(2) - (kernel - 1);
  carry = last_rows(in, std::min(kernel - 1, in.size(2)));
  if (out_rows <= 0) return {};
  torch::Tensor y = modules_[static_cast<size_t>(i)].conv->forward(in);
  TESSERA_CHECK(y.size(2) == out_rows);
  double taps = 1;
  for (int d = 0; d < net_->options().dims; ++d) taps *= double(kernel);
  flops_ += 2.0 * taps * double(in.size(1)) * double(y.size(1)) * spatial_elements(y);
  return y;
}

torch::Tensor StreamExecutor::pool(int i, const torch::Tensor& x) {
  torch::Tensor& carry = carry_[static_cast<size_t>(i)];
  const torch::Tensor in = joined(carry, x);
  if (!in.defined()) return {};
  const int64_t pairs = in.size(2) / 2;
  carry = last_rows(in, in.size(2) % 2);
  if (pairs == 0) return {};
  return max_pool2x(rows_of(in, 0, 2 * pairs));
}

void StreamExecutor::keep_skip(int i, const torch::Tensor& x) {
  if (!x.defined()) return;
  for (size_t e = 0; e < seq_.skips.size(); ++e) {
    if (seq_.skips[e].producer != i) continue;
    // Kept cropped across (the decoder never reads the margins): in 3-D the margins of the
    // widest skip are most of its slices.
    torch::Tensor kept = x;
    for (int64_t d = 3; d < x.dim(); ++d) kept = kept.narrow(d, crop_[e], x.size(d) - 2 * crop_[e]);
    const int64_t consumed = consumed_[static_cast<size_t>(seq_.skips[e].consumer)];
    skip_[e].append(kept, consumed + crop_[e]);
  }
}

void StreamExecutor::SkipRows::append(const torch::Tensor& x, int64_t needed) {
  const int64_t next = first + rows;  // x's first row
  const int64_t unread = std::clamp<int64_t>(needed - next, 0, x.size(2));
  if (unread > 0) {
    TESSERA_CHECK(rows == 0);  // the rows before `needed` were dropped as the decoder passed them
    first = next + unread;
  }
  if (unread == x.size(2)) return;
  chunks.push_back(rows_of(x, unread, x.size(2) - unread).clone());
  rows += x.size(2) - unread;
}

void StreamExecutor::SkipRows::copy_to(int64_t from, const torch::Tensor& out) const {
  const int64_t count = out.size(2);
  TESSERA_CHECK(from >= first && from + count <= first + rows);
  int64_t start = first;  // of the chunk at hand
  for (const torch::Tensor& c : chunks) {
    const int64_t lo = std::max(from, start), hi = std::min(from + count, start + c.size(2));
    if (lo < hi) rows_of(out, lo - from, hi - lo).copy_(rows_of(c, lo - start, hi - lo));
    start += c.size(2);
  }
}

void StreamExecutor::SkipRows::drop_before(int64_t row) {
  while (!chunks.empty() && first < row) {
    torch::Tensor& c = chunks.front();
    const int64_t drop = std::min(row - first, c.size(2));
    if (drop == c.size(2)) chunks.pop_front();
    else c = rows_of(c, drop, c.size(2) - drop);
    first += drop;
    rows -= drop;
  }
}

torch::Tensor StreamExecutor::concat(int i, const torch::Tensor& x) {
  if (!x.defined()) return x;
  size_t e = 0;
  while (seq_.skips[e].consumer != i) ++e;
  const int64_t c = crop_[e];
  int64_t& done = consumed_[static_cast<size_t>(i)];
  // Decoder row j meets encoder row j + c; the encoder is ahead, so its rows are here. Both
  // halves are copied once, into the next convolution's input where one follows.
  TESSERA_CHECK(!skip_[e].chunks.empty());  // the encoder is ahead: its rows are here (a misaligned strip is not)
  const int64_t n = x.size(2), skip_channels = skip_[e].chunks.front().size(1);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape[1] += skip_channels;
  torch::Tensor y = feeds_convolution(i) ? place(i + 1, shape)
                                        : torch::empty(shape, x.options().memory_format(x.suggest_memory_format()));
  for (int64_t d = 3; d < x.dim(); ++d) TESSERA_CHECK(skip_[e].chunks.front().size(d) == x.size(d));
  skip_[e].copy_to(done + c, y.narrow(1, 0, skip_channels));
  y.narrow(1, skip_channels, x.size(1)).copy_(x);
  done += n;
  skip_[e].drop_before(done + c);
  return y;
}

}  // namespace tessera
