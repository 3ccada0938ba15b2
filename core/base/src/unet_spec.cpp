#include "tessera/core/unet_spec.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

int64_t filters_at(const UNetOptions& o, int level) { return int64_t{o.base_filters} << level; }
int64_t loss_per_conv(const UNetOptions& o) {
  return o.padding == Padding::kValid ? o.kernel - 1 : 0;
}
int64_t ipow(int64_t b, int e) {
  int64_t r = 1;
  while (e-- > 0) r *= b;
  return r;
}

// The walk of a `valid` network over one axis; `same` keeps every size.
std::optional<int64_t> walk(const UNetOptions& o, int64_t input, int64_t loss) {
  const int L = o.levels;
  std::vector<int64_t> skip(L);
  int64_t s = input;
  for (int l = 0; l < L; ++l) {
    s -= loss * o.convs_per_level;
    if (s < 1) return std::nullopt;
    skip[l] = s;
    if (l < L - 1) {
      if (s % 2 != 0) return std::nullopt;
      s /= 2;
    }
  }
  for (int l = L - 2; l >= 0; --l) {
    s *= 2;
    const int64_t crop = skip[l] - s;
    if (crop < 0 || crop % 2 != 0) return std::nullopt;
    s -= loss * o.convs_per_level;
    if (s < 1) return std::nullopt;
  }
  return s;
}

// `same` padding: how many input pixels next to a tile's edge differ from the whole image's
// (the tile zero-pads where the image has values), for a tile starting on the pooling grid.
// Each K-wide convolution moves the wrong band (K−1)/2 of its level's pixels inward (the first
// one starts it at the edge), 2× pooling halves it rounding up, 2× upsampling doubles it, a
// skip brings its own; a 1×1 head keeps it. Above the valid halo by the rounding: unet-tiny
// 46 (valid 44), unet-small 94 (92).
int64_t same_padding_reach(const UNetOptions& o) {
  const int64_t per_level = (o.kernel - 1) / 2 * o.convs_per_level;
  std::vector<int64_t> skip(static_cast<size_t>(o.levels));
  int64_t w = 0;
  for (int l = 0; l < o.levels; ++l) {
    w += per_level;
    skip[static_cast<size_t>(l)] = w;
    if (l < o.levels - 1) w = (w + 1) / 2;
  }
  for (int l = o.levels - 2; l >= 0; --l) w = std::max(2 * w, skip[static_cast<size_t>(l)]) + per_level;
  return w;
}

}  // namespace

std::string to_string(Padding p) { return p == Padding::kValid ? "valid" : "same"; }
std::string to_string(Norm n) {
  switch (n) {
    case Norm::kNone: return "none";
    case Norm::kBatch: return "batch";
    case Norm::kGroup: return "group";
    case Norm::kInstance: return "instance";
  }
  return "?";
}
std::string to_string(Decoder d) { return d == Decoder::kTransposed ? "transposed" : "upsample"; }

Padding parse_padding(const std::string& s) {
  if (s == "valid") return Padding::kValid;
  if (s == "same") return Padding::kSame;
  throw Error("padding: '" + s + "' is not one of valid, same");
}
Norm parse_norm(const std::string& s) {
  if (s == "none") return Norm::kNone;
  if (s == "batch") return Norm::kBatch;
  if (s == "group") return Norm::kGroup;
  if (s == "instance") return Norm::kInstance;
  throw Error("norm: '" + s + "' is not one of none, batch, group, instance");
}
Decoder parse_decoder(const std::string& s) {
  if (s == "transposed") return Decoder::kTransposed;
  if (s == "upsample") return Decoder::kUpsample;
  throw Error("decoder: '" + s + "' is not one of transposed, upsample");
}

void UNetOptions::validate() const {
  auto bad = [](const std::string& field, const std::string& why) {
    throw Error("model option '" + field + "': " + why);
  };
  if (dims != 2 && dims != 3) bad("dims", "must be 2 or 3, got " + std::to_string(dims));
  if (in_channels < 1) bad("in_channels", "must be >= 1");
  if (classes < 2) bad("classes", "must be >= 2, got " + std::to_string(classes));
  if (levels < 1 || levels > 10) bad("levels", "must be in 1..10, got " + std::to_string(levels));
  if (convs_per_level < 1) bad("convs_per_level", "must be >= 1");
  if (base_filters < 1) bad("base_filters", "must be >= 1");
  if (kernel < 1 || kernel % 2 == 0) bad("kernel", "must be odd and >= 1, got " + std::to_string(kernel));
  if (name.empty()) bad("name", "must name the built-in \"unet\" or a registered model");
  for (const std::string& preset : unet_preset_names())
    if (name == preset) bad("name", "'" + name + "' is a U-Net preset, not a model name: use preset: " + name);
  if (!is_builtin()) {
    // A registry model is built by its own factory: only the fields it is given may vary.
    if (padding != Padding::kSame) bad("padding", name + " is a same-padding model; padding must be same");
    if (kernel != 3) bad("kernel", name + " has 3-wide kernels; kernel must be 3");
  }
}

UNetOptions unet_preset(const std::string& name) {
  static const std::map<std::string, UNetOptions> presets = [] {
    std::map<std::string, UNetOptions> m;
    m["unet-tiny"] = UNetOptions{}.with_levels(4).with_base_filters(16);
    m["unet-small"] = UNetOptions{}.with_levels(5).with_base_filters(64);
    m["unet-medium1"] = UNetOptions{}.with_levels(5).with_convs_per_level(5);
    m["unet-medium2"] = UNetOptions{}.with_levels(6);
    m["unet-large"] = UNetOptions{}.with_levels(7);
    const UNetOptions v3 = UNetOptions{}.with_dims(3).with_in_channels(1).with_classes(3);
    m["unet3d-tiny"] = UNetOptions(v3).with_levels(3).with_base_filters(16);
    m["unet3d-32"] = UNetOptions(v3).with_levels(5).with_base_filters(32);
    m["unet3d-64"] = UNetOptions(v3).with_levels(5).with_base_filters(64);
    m["unet3d-128"] = UNetOptions(v3).with_levels(5).with_base_filters(128);
    return m;
  }();
  auto it = presets.find(name);
  if (it == presets.end()) {
    std::string names;
    for (const auto& [k, v] : presets) names += (names.empty() ? "" : ", ") + k;
    throw Error("model: unknown preset '" + name + "' (known: " + names + ")");
  }
  return it->second;
}

std::vector<std::string> unet_preset_names() {
  return {"unet-tiny", "unet-small", "unet-medium1", "unet-medium2", "unet-large",
          "unet3d-tiny", "unet3d-32", "unet3d-64", "unet3d-128"};
}

std::optional<int64_t> unet_output_size(const UNetOptions& o, int64_t input) {
  return walk(o, input, loss_per_conv(o));
}

int64_t unet_alignment(const UNetOptions& o) { return int64_t{1} << (o.levels - 1); }

int64_t unet_halo(const UNetOptions& o) {
  if (o.padding == Padding::kSame) {
    // The reach of a tile edge's zero padding, rounded up so that an aligned inset plus both
    // halos stays a multiple of the alignment (a valid input; unet-small: 94 → 96).
    const int64_t reach = same_padding_reach(o), half = unet_alignment(o) / 2;
    return half == 0 ? reach : (reach + half - 1) / half * half;
  }
  // Walk the network from the smallest input that survives: what it loses per side.
  for (int64_t in = 1; in < (int64_t{1} << 24); ++in)
    if (auto out = walk(o, in, o.kernel - 1)) return (in - *out) / 2;
  throw Error("model: no valid input size (too many levels for this kernel)");
}

int64_t unet_remainder(const UNetOptions& o) {
  if (o.padding == Padding::kSame) return 0;
  const int64_t a = unet_alignment(o);
  for (int64_t in = 1; in < (int64_t{1} << 24); ++in) {
    if (auto out = walk(o, in, o.kernel - 1)) return *out % a;
  }
  throw Error("model: no valid input size (too many levels for this kernel)");
}

int64_t unet_receptive_field(const UNetOptions& o) {
  // Classic receptive-field arithmetic along the deepest path: each conv adds (K−1)·jump,
  // each pooling adds 1·jump and doubles the jump; transposed/upsampling steps add nothing.
  int64_t rf = 1, jump = 1;
  for (int l = 0; l < o.levels; ++l) {
    rf += o.convs_per_level * (o.kernel - 1) * jump;
    if (l < o.levels - 1) {
      rf += jump;
      jump *= 2;
    }
  }
  for (int l = o.levels - 2; l >= 0; --l) {
    jump /= 2;
    rf += o.convs_per_level * (o.kernel - 1) * jump;
  }
  return rf;
}

int64_t unet_parameter_count(const UNetOptions& o) {
  const int64_t kd = ipow(o.kernel, o.dims);
  const int64_t norm_per_channel = o.norm == Norm::kNone ? 0 : 2;
  int64_t n = 0;
  auto conv = [&](int64_t cin, int64_t cout, int64_t taps) { n += taps * cin * cout + cout; };
  auto block = [&](int64_t cin, int64_t c) {
    for (int i = 0; i < o.convs_per_level; ++i) {
      conv(i == 0 ? cin : c, c, kd);
      n += norm_per_channel * c;
    }
  };
  for (int l = 0; l < o.levels; ++l) block(l == 0 ? o.in_channels : filters_at(o, l - 1), filters_at(o, l));
  for (int l = o.levels - 2; l >= 0; --l) {
    const int64_t up_taps = o.decoder == Decoder::kTransposed ? ipow(2, o.dims) : 1;
    conv(filters_at(o, l + 1), filters_at(o, l), up_taps);
    block(2 * filters_at(o, l), filters_at(o, l));
  }
  conv(filters_at(o, 0), o.classes, 1);
  return n;
}

double unet_flops_per_output_pixel(const UNetOptions& o) {
  const double kd = static_cast<double>(ipow(o.kernel, o.dims));
  double flops = 0;
  auto density = [&](int l) { return std::pow(2.0, -double(o.dims) * l); };
  auto block = [&](int l, double cin, double c) {
    for (int i = 0; i < o.convs_per_level; ++i) flops += 2.0 * kd * (i == 0 ? cin : c) * c * density(l);
  };
  for (int l = 0; l < o.levels; ++l)
    block(l, l == 0 ? o.in_channels : double(filters_at(o, l - 1)), double(filters_at(o, l)));
  for (int l = o.levels - 2; l >= 0; --l) {
    const double cin = double(filters_at(o, l + 1)), c = double(filters_at(o, l));
    // Transposed 2^D stride 2: one input tap per output pixel at level l. Upsampling: the
    // 1×1 convolution runs at level l+1, before the nearest-neighbour upsampling.
    flops += 2.0 * cin * c * (o.decoder == Decoder::kTransposed ? density(l) : density(l + 1));
    block(l, 2 * c, c);
  }
  flops += 2.0 * double(filters_at(o, 0)) * o.classes;
  return flops;
}

int unet_layer_count(const UNetOptions& o) {
  const int per_conv = o.norm == Norm::kNone ? 2 : 3;  // conv (+ norm) + activation
  const int enc = o.levels * o.convs_per_level * per_conv + (o.levels - 1);  // + pools
  const int dec = (o.levels - 1) * (2 + o.convs_per_level * per_conv);       // up + concat
  return enc + dec + 1;                                                      // + head
}

}  // namespace tessera
