// The seed paper's U-Net (torchgpipe's benchmark U-Net, plugins/seed_unet) as a layer
// sequence, so the simulator and the planner's balance see its FLOPs and memory. The
// architecture is the plugin's (its header comment); the memory attribution follows
// core/layer_sequence.hpp's rules: a conv's output is kept by the dropout + instance norm
// that follow it (one layer here: output and the dropout mask), the LeakyReLU keeps its input
// (the norm's output) and its output is the next conv's saved input.
#include <cmath>

#include "tessera/core/error.hpp"
#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::parallel {
namespace {

constexpr int64_t kFloat = 4;

class SeedBuilder {
 public:
  SeedBuilder(const UNetOptions& o, int64_t side) : o_(o), side_(side) {}

  // n_c × (conv → dropout + instance norm → LeakyReLU): in → hidden → … → out. Returns the
  // index of its last layer (the skip producer for encoder cells).
  int cell(const std::string& prefix, int level, int64_t in, int64_t hidden, int64_t out) {
    for (int i = 0; i < o_.convs_per_level; ++i) {
      const int64_t ci = i == 0 ? in : hidden, co = i == o_.convs_per_level - 1 ? out : hidden;
      const std::string n = std::to_string(i);
      conv(prefix + ".conv" + n, level, ci, co, 3);
      Layer& norm = add(LayerKind::kNorm, prefix + ".norm" + n, level, co, co, level);
      norm.saved_bytes = norm.out_elements * (kFloat + 1);  // normalised output + dropout mask
      Layer& act = add(LayerKind::kActivation, prefix + ".relu" + n, level, co, co, level);
      act.saved_bytes = act.out_elements * kFloat;
    }
    return seq_.size() - 1;
  }

  void conv(const std::string& name, int level, int64_t in, int64_t out, int kernel) {
    Layer& c = add(name == "head" ? LayerKind::kHead : LayerKind::kConv, name, level, in, out, level);
    const double taps = std::pow(kernel, o_.dims);
    c.params = static_cast<int64_t>(taps) * in * out;  // no bias
    c.flops = 2.0 * taps * static_cast<double>(in * out) * static_cast<double>(positions(level));
    c.saved_bytes = c.out_elements * kFloat;  // kept by the dropout / norm after it, or the loss
  }

  Layer& add(LayerKind kind, const std::string& name, int level, int64_t in, int64_t out, int in_level) {
    Layer l;
    l.kind = kind;
    l.name = name;
    l.level = level;
    l.in_channels = in;
    l.out_channels = out;
    l.in_side = side_ >> in_level;
    l.out_side = side_ >> level;
    l.in_elements = in * positions(in_level);
    l.out_elements = out * positions(level);
    seq_.layers.push_back(l);
    return seq_.layers.back();
  }

  int64_t positions(int level) const {
    int64_t n = 1;
    for (int a = 0; a < o_.dims; ++a) n *= side_ >> level;
    return n;
  }

  LayerSequence build() {
    const int d = o_.levels - 1;
    const int64_t F = o_.base_filters;
    auto width = [F](int l) { return F << l; };
    std::vector<int> skip_producer(d);
    for (int l = 0; l < d; ++l) {
      skip_producer[l] = cell("enc" + std::to_string(l), l, l == 0 ? o_.in_channels : width(l - 1), width(l), width(l));
      Layer& pool = add(LayerKind::kPool, "pool" + std::to_string(l), l + 1, width(l), width(l), l);
      pool.saved_bytes = pool.out_elements * (kFloat + 8);  // next conv's input + indices
    }
    cell("bottleneck", d, width(d - 1), width(d), width(d - 1));
    for (int l = d - 1; l >= 0; --l) {
      const int64_t halved = F << l >> 1;
      add(LayerKind::kUp, "up" + std::to_string(l), l, width(l), width(l), l + 1);  // nearest: no FLOPs
      Layer& cat = add(LayerKind::kConcat, "dec" + std::to_string(l) + ".concat", l, width(l), width(l + 1), l);
      cat.saved_bytes = cat.out_elements * kFloat;
      const int64_t skip = width(l) * positions(l);
      seq_.skips.push_back({skip_producer[l], seq_.size() - 1, skip, skip});
      cell("dec" + std::to_string(l), l, width(l + 1), halved, halved);
    }
    conv("head", 0, F >> 1, o_.classes, 1);
    seq_.options = o_;
    seq_.input_side = side_;
    seq_.output_side = side_;
    return seq_;
  }

 private:
  UNetOptions o_;
  int64_t side_;
  LayerSequence seq_;
};

}  // namespace

LayerSequence seed_unet_layer_sequence(const UNetOptions& o, int64_t side) {
  const int64_t align = int64_t{1} << (o.levels - 1);
  if (side < align)  // pooling floors other sides, as torchgpipe's does
    throw Error("side " + std::to_string(side) + " of " + o.name + " must be at least " + std::to_string(align) +
                " (2^depth)");
  if (o.levels < 2 || o.base_filters < 2 || o.convs_per_level < 1)
    throw Error(o.name + ": levels >= 2, filters >= 2 and convs >= 1 required");
  return SeedBuilder(o, side).build();
}

}  // namespace tessera::parallel
