#pragma once
// UNetOptions describes one member of the U-Net family, for 2-D (NCHW) and 3-D (NCDHW),
// and answers every question about it that needs no LibTorch: halo ε, valid-size
// remainder r, pooling alignment 2^(L-1), receptive field, parameter count and FLOPs per
// output pixel. The planner, the viewer and `tessera model-info` use these; unet.hpp
// builds the network itself from the same options.
//
// Architecture (Ronneberger et al.): level ℓ has n_c convolutions K^D with f·2^ℓ filters
// followed (except at the bottom) by 2^D max pooling; the decoder goes up with a transposed
// 2^D convolution (or nearest upsampling after a 1×1 convolution), concatenates the
// centre-cropped encoder output of its level and applies n_c convolutions; a 1×1 head
// gives the class logits.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

enum class Padding { kValid, kSame };
enum class Norm { kNone, kBatch, kGroup, kInstance };
enum class Decoder { kTransposed, kUpsample };

std::string to_string(Padding p);
std::string to_string(Norm n);
std::string to_string(Decoder d);
Padding parse_padding(const std::string& s);  // throws tessera::Error naming the value
Norm parse_norm(const std::string& s);
Decoder parse_decoder(const std::string& s);

struct UNetOptions {
  /// "unet": the built-in U-Net family described by the fields below. Any other name is a
  /// model of the registry (model_registry.hpp; a plugin such as "se-unet") that the network
  /// handle builds through its factory from dims, in_channels, classes, levels,
  /// convs_per_level, base_filters and norm; such models keep `same` padding and kernel 3, and
  /// their tile geometry (alignment, receptive-field halo) is the U-Net's of the same shape.
  std::string name = "unet";
  int dims = 2;             ///< 2 or 3 spatial dimensions
  int in_channels = 4;      ///< bands / channels of the input
  int classes = 4;          ///< output classes (logits)
  int levels = 5;           ///< L, including the bottom level
  int convs_per_level = 2;  ///< n_c
  int base_filters = 64;    ///< f; level ℓ has f·2^ℓ
  int kernel = 3;           ///< K (odd)
  Padding padding = Padding::kValid;
  Norm norm = Norm::kNone;
  Decoder decoder = Decoder::kTransposed;

  UNetOptions& with_name(std::string v) { name = std::move(v); return *this; }
  UNetOptions& with_dims(int v) { dims = v; return *this; }
  UNetOptions& with_in_channels(int v) { in_channels = v; return *this; }
  UNetOptions& with_classes(int v) { classes = v; return *this; }
  UNetOptions& with_levels(int v) { levels = v; return *this; }
  UNetOptions& with_convs_per_level(int v) { convs_per_level = v; return *this; }
  UNetOptions& with_base_filters(int v) { base_filters = v; return *this; }
  UNetOptions& with_kernel(int v) { kernel = v; return *this; }
  UNetOptions& with_padding(Padding v) { padding = v; return *this; }
  UNetOptions& with_norm(Norm v) { norm = v; return *this; }
  UNetOptions& with_decoder(Decoder v) { decoder = v; return *this; }

  /// Throws tessera::Error naming the first bad field.
  void validate() const;
  bool operator==(const UNetOptions&) const = default;
  /// The built-in family (not a registry model built by its factory).
  bool is_builtin() const { return name == "unet"; }
};

/// Named presets: unet-tiny, unet-small, unet-medium1, unet-medium2, unet-large,
/// unet3d-tiny, unet3d-32, unet3d-64, unet3d-128. Throws listing the names when unknown.
UNetOptions unet_preset(const std::string& name);
std::vector<std::string> unet_preset_names();

/// Output side for an input side, or nullopt when some feature map would be odd before a
/// pooling, too small, or a skip crop off-centre. `same` padding keeps sizes.
std::optional<int64_t> unet_output_size(const UNetOptions& o, int64_t input);
/// 2^(L-1): tile origins and steps must be multiples of it.
int64_t unet_alignment(const UNetOptions& o);
/// ε: input pixels lost per side (valid), or the receptive-field radius cropped per side
/// (same). Derived by walking the layers.
int64_t unet_halo(const UNetOptions& o);
/// r: valid output sides are S + r for S a multiple of the alignment (0 for same).
int64_t unet_remainder(const UNetOptions& o);
/// Receptive field side in input pixels of one output pixel.
int64_t unet_receptive_field(const UNetOptions& o);
/// Learnable parameters (weights, biases, norm affine terms).
int64_t unet_parameter_count(const UNetOptions& o);
/// Forward FLOPs (a multiply-add is 2) per output pixel for a large tile, halo excluded.
double unet_flops_per_output_pixel(const UNetOptions& o);
/// Number of layers in the forward sequence (conv, norm, activation, pool, up, concat, head).
int unet_layer_count(const UNetOptions& o);

}  // namespace tessera
