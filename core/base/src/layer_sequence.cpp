#include "tessera/core/layer_sequence.hpp"

#include <algorithm>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

constexpr int64_t kFloatBytes = 4;
constexpr int64_t kIndexBytes = 8;  // max pool indices are int64

int64_t ipow(int64_t b, int e) {
  int64_t r = 1;
  while (e-- > 0) r *= b;
  return r;
}

// Appends layers in UNetImpl::forward order, tracking the current side and channels.
class Builder {
 public:
  Builder(const UNetOptions& o, int64_t input_side)
      : o_(o), side_(input_side), channels_(o.in_channels), loss_(o.padding == Padding::kValid ? o.kernel - 1 : 0) {
    layers_.reserve(static_cast<size_t>(unet_layer_count(o)));  // references returned by add() stay valid
  }

  Layer& add(LayerKind kind, std::string name, int level, int64_t out_channels, int64_t out_side) {
    if (out_side < 1)
      throw Error("layer sequence: input_side " + std::to_string(seq_input_side()) + " is too small: layer " + name +
                  " would have side " + std::to_string(out_side));
    Layer l;
    l.kind = kind;
    l.name = std::move(name);
    l.level = level;
    l.in_channels = channels_;
    l.out_channels = out_channels;
    l.in_side = side_;
    l.out_side = out_side;
    l.in_elements = channels_ * ipow(side_, o_.dims);
    l.out_elements = out_channels * ipow(out_side, o_.dims);
    layers_.push_back(l);
    channels_ = out_channels;
    side_ = out_side;
    return layers_.back();
  }

  // n_c × (conv [norm] relu) at `level`, as ConvBlockImpl.
  void block(const std::string& prefix, int level, int64_t out) {
    const int64_t taps = ipow(o_.kernel, o_.dims);
    for (int i = 0; i < o_.convs_per_level; ++i) {
      const std::string n = std::to_string(i);
      const int64_t cin = channels_;
      Layer& c = add(LayerKind::kConv, prefix + ".conv" + n, level, out, side_ - loss_);
      c.params = taps * cin * out + out;
      c.flops = 2.0 * double(taps) * double(cin) * double(out) * double(ipow(c.out_side, o_.dims));
      if (o_.norm != Norm::kNone) {
        c.saved_bytes = c.out_elements * kFloatBytes;  // the norm saves its input
        Layer& nl = add(LayerKind::kNorm, prefix + ".norm" + n, level, out, side_);
        nl.params = 2 * out;
      }
      Layer& r = add(LayerKind::kActivation, prefix + ".relu" + n, level, out, side_);
      r.saved_bytes = r.out_elements * kFloatBytes;
    }
  }

  int64_t side() const { return side_; }
  int64_t channels() const { return channels_; }
  int64_t seq_input_side() const { return layers_.empty() ? side_ : layers_.front().in_side; }
  std::vector<Layer>& layers() { return layers_; }
  void set_channels(int64_t c) { channels_ = c; }

 private:
  const UNetOptions& o_;
  int64_t side_, channels_, loss_;
  std::vector<Layer> layers_;
};

}  // namespace

std::string to_string(LayerKind k) {
  switch (k) {
    case LayerKind::kConv: return "conv";
    case LayerKind::kNorm: return "norm";
    case LayerKind::kActivation: return "relu";
    case LayerKind::kPool: return "pool";
    case LayerKind::kUp: return "up";
    case LayerKind::kConcat: return "concat";
    case LayerKind::kHead: return "head";
    case LayerKind::kTail: return "tail";
  }
  return "?";
}

int64_t LayerSequence::parameter_count() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.params;
  return n;
}

double LayerSequence::flops() const {
  double f = 0;
  for (const auto& l : layers) f += l.flops;
  return f;
}

LayerSequence unet_layer_sequence(const UNetOptions& o, int64_t input_side) {
  o.validate();
  const auto expected = unet_output_size(o, input_side);
  if (!expected)
    throw Error("layer sequence: input_side " + std::to_string(input_side) +
                " is not a valid input for this model (valid sides are S + " + std::to_string(unet_remainder(o)) +
                " + 2·" + std::to_string(unet_halo(o)) + ", S a multiple of " + std::to_string(unet_alignment(o)) + ")");
  const int L = o.levels;
  auto filters = [&](int l) { return int64_t{o.base_filters} << l; };
  Builder b(o, input_side);
  std::vector<int> skip_producer(L, -1);
  for (int l = 0; l < L; ++l) {
    b.block("enc" + std::to_string(l), l, filters(l));
    if (l < L - 1) {
      skip_producer[l] = static_cast<int>(b.layers().size()) - 1;
      Layer& p = b.add(LayerKind::kPool, "pool" + std::to_string(l), l + 1, b.channels(), b.side() / 2);
      p.saved_bytes = p.out_elements * (kFloatBytes + kIndexBytes);  // next conv's input + indices
    }
  }
  LayerSequence seq;
  for (int l = L - 2; l >= 0; --l) {
    const int64_t cin = b.channels(), c = filters(l);
    const int64_t in_volume = ipow(b.side(), o.dims);
    Layer& up = b.add(LayerKind::kUp, "up" + std::to_string(l), l, c, b.side() * 2);
    if (o.decoder == Decoder::kTransposed) {
      up.params = ipow(2, o.dims) * cin * c + c;
      up.flops = 2.0 * double(cin) * double(c) * double(ipow(up.out_side, o.dims));  // one tap per output
    } else {
      up.params = cin * c + c;
      up.flops = 2.0 * double(cin) * double(c) * double(in_volume);  // 1×1 conv before upsampling
    }
    const int64_t producer_side = b.layers()[skip_producer[l]].out_side;
    const int64_t producer_elements = b.layers()[skip_producer[l]].out_elements;
    const int64_t crop = producer_side - up.out_side;
    TESSERA_CHECK(crop >= 0 && crop % 2 == 0);  // unet_output_size accepted the side
    const int consumer = static_cast<int>(b.layers().size());
    Layer& cat = b.add(LayerKind::kConcat, "dec" + std::to_string(l) + ".concat", l, 2 * c, b.side());
    cat.in_channels = c;  // main input: the up-sampled tensor; the skip is the other half
    cat.in_elements = c * ipow(cat.in_side, o.dims);
    cat.saved_bytes = cat.out_elements * kFloatBytes;
    seq.skips.push_back({skip_producer[l], consumer, producer_elements, c * ipow(cat.out_side, o.dims)});
    b.block("dec" + std::to_string(l), l, c);
  }
  Layer& head = b.add(LayerKind::kHead, "head", 0, o.classes, b.side());
  head.params = filters(0) * o.classes + o.classes;
  head.flops = 2.0 * double(filters(0)) * double(o.classes) * double(ipow(head.out_side, o.dims));
  head.saved_bytes = head.out_elements * kFloatBytes;  // logits, kept by the loss

  TESSERA_CHECK(b.side() == *expected);
  seq.options = o;
  seq.input_side = input_side;
  seq.output_side = b.side();
  seq.layers = std::move(b.layers());
  // Skips were collected deepest first; order them by producer like the layers.
  std::reverse(seq.skips.begin(), seq.skips.end());
  return seq;
}

LayerSequence with_block_tails(LayerSequence seq, const std::string& tail,
                               const std::function<int64_t(const std::string& block)>& params) {
  std::vector<Layer> layers;
  std::vector<int> moved(seq.layers.size());  // old index → new index
  for (size_t i = 0; i < seq.layers.size(); ++i) {
    const Layer& l = seq.layers[i];
    moved[i] = static_cast<int>(layers.size());
    layers.push_back(l);
    const std::string block = l.name.substr(0, l.name.find('.'));
    const bool block_ends = l.kind == LayerKind::kActivation &&
                            (i + 1 == seq.layers.size() || seq.layers[i + 1].name.rfind(block + ".", 0) != 0);
    if (!block_ends) continue;
    Layer t = l;
    t.kind = LayerKind::kTail;
    t.name = block + "." + tail;
    t.in_channels = l.out_channels;
    t.in_elements = l.out_elements;
    t.in_side = l.out_side;
    t.params = params(block);
    t.flops = 0;  // a per-channel product and a few small matrix products: not convolution work
    t.saved_bytes = t.out_elements * kFloatBytes;
    moved[i] = static_cast<int>(layers.size());  // a skip leaves from the block's last layer
    layers.push_back(std::move(t));
  }
  for (SkipEdge& e : seq.skips) {
    e.producer = moved[static_cast<size_t>(e.producer)];
    e.consumer = moved[static_cast<size_t>(e.consumer)];  // a concatenation: never a block's end
  }
  seq.layers = std::move(layers);
  return seq;
}

LayerSequence with_name_prefix(LayerSequence seq, const std::string& prefix) {
  for (Layer& l : seq.layers) l.name = prefix + l.name;
  return seq;
}

int64_t layer_bytes(const Layer& layer, int64_t micro_batch, bool training) {
  if (!training) return kFloatBytes * layer.params;
  return layer.saved_bytes * micro_batch + 4 * kFloatBytes * layer.params;
}

Index unet_whole_input(const UNetOptions& o, const Index& extent) {
  const int64_t halo = o.padding == Padding::kValid ? unet_halo(o) : 0;
  const int64_t a = unet_alignment(o);
  Index sides;
  for (int64_t n : extent) {
    int64_t in = o.padding == Padding::kValid ? n + 2 * halo : (n + a - 1) / a * a;
    while (!unet_output_size(o, in)) ++in;
    sides.push_back(in);
  }
  return sides;
}

}  // namespace tessera
