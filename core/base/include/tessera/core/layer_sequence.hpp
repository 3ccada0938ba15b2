#pragma once
// A U-Net presented as what a pipeline cuts: the ordered list of its forward layers plus the
// skip edges between them, with the size, cost and memory of every layer for one input tile.
// The order is exactly UNetImpl::forward's (unet.cpp): per encoder level n_c × (conv [norm]
// relu) then a 2^D max pool; per decoder level (deepest first) the up-sampling step (a
// transposed 2^D convolution, or a 1×1 convolution followed by nearest up-sampling — one
// layer either way), the concatenation with the centre-cropped encoder output, n_c ×
// (conv [norm] relu); finally the 1×1 head. So `layers.size() == unet_layer_count(o)`.
//
// Units: sides in pixels/voxels per axis (tiles are cubes: side^D), element counts and bytes
// per sample (one tile; float32 activations), FLOPs per sample forward (a multiply-add is 2,
// convolutions only, as unet_flops_per_output_pixel: element-wise layers count 0 FLOPs).
// Torch-free plain values; thread safe once built.
//
// Memory model (what LibTorch's autograd keeps for backward, attributed to the layer whose
// output it is, so no tensor is counted twice):
//   - a ReLU (in place, `relu_`) keeps its result, which is also the next conv's/pool's saved
//     input; a conv followed by a norm has its output kept by the norm (batch/group norm save
//     their input); a conv followed directly by ReLU is counted at the ReLU;
//   - a max pool keeps its output (the next conv's input) and its int64 indices;
//   - the up-sampling step's output is consumed by the concatenation, which saves nothing;
//     the concatenation's output is the next conv's saved input;
//   - the head's logits are kept by the loss.
// The tensor a layer *receives* (the network input, or an activation from the previous
// pipeline stage) is held by the receiver: see stage_bytes() in parallel/planner.hpp.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/geometry.hpp"
#include "tessera/core/unet_spec.hpp"

namespace tessera {

/// kTail: a shape-preserving layer a registry model runs after the last activation of each
/// convolution block (a Squeeze-and-Excitation block; with_block_tails()).
enum class LayerKind { kConv, kNorm, kActivation, kPool, kUp, kConcat, kHead, kTail };
std::string to_string(LayerKind k);

struct Layer {
  LayerKind kind = LayerKind::kConv;
  std::string name;          ///< module path as in parameter names: enc0.conv0, pool0, up1, dec1.concat, head
  int level = 0;             ///< U-Net level ℓ the output lives at
  int64_t in_channels = 0;   ///< channels of the (main) input
  int64_t out_channels = 0;
  int64_t in_side = 0;       ///< input side per axis
  int64_t out_side = 0;      ///< output side per axis
  int64_t params = 0;        ///< learnable parameters (weights, biases, norm affine terms)
  double flops = 0;          ///< forward FLOPs per sample (convolutions only)
  int64_t in_elements = 0;   ///< elements of the main input per sample
  int64_t out_elements = 0;  ///< elements of the output per sample
  int64_t saved_bytes = 0;   ///< bytes per sample kept for backward, attributed to this layer
};

/// Skip connection: the encoder output of level ℓ (a ReLU) consumed by the decoder's
/// concatenation at level ℓ, centre-cropped to the decoder's side.
struct SkipEdge {
  int producer = 0;              ///< index of the producing layer
  int consumer = 0;              ///< index of the concatenation consuming it (> producer)
  int64_t elements = 0;          ///< elements per sample of the producer's full output
  int64_t cropped_elements = 0;  ///< elements per sample actually consumed (what a stage sends)
};

struct LayerSequence {
  UNetOptions options;
  int64_t input_side = 0;   ///< network input side per axis (S + r + 2ε for a valid tile)
  int64_t output_side = 0;  ///< == unet_output_size(options, input_side)
  std::vector<Layer> layers;
  std::vector<SkipEdge> skips;

  int size() const { return static_cast<int>(layers.size()); }
  int64_t parameter_count() const;
  double flops() const;  ///< forward FLOPs per sample, sum over layers
};

/// The layer sequence of the U-Net `o` for cubic input tiles of side `input_side`. Throws
/// tessera::Error naming `input_side` when the network cannot take it (see unet_output_size),
/// or naming the model field when `o` is invalid.
LayerSequence unet_layer_sequence(const UNetOptions& o, int64_t input_side);

/// `seq` with a layer `<block>.<tail>` of kind kTail after the last activation of every
/// convolution block (enc<ℓ>, dec<ℓ>): same channels and sides, `params(block)` learnable
/// parameters, its output kept for backward (the next layer's input; the activation before it
/// stays kept, as the tail's product saves it). A skip then leaves from the tail. Layer and
/// skip indices after each insertion shift by one.
LayerSequence with_block_tails(LayerSequence seq, const std::string& tail,
                               const std::function<int64_t(const std::string& block)>& params);

/// `seq` with every layer's name prefixed by `prefix` ("model." for a registry model held as
/// the submodule "model" of the network handle), so names stay the parameters' paths.
LayerSequence with_name_prefix(LayerSequence seq, const std::string& prefix);

/// Per-layer additive memory cost in bytes for `micro_batch` samples:
///   training:  saved_bytes × micro_batch + 16 × params (float32 weights, gradients, and
///              Adam's two moments: 4 + 4 + 2·4 bytes per parameter);
///   inference: 4 × params (weights only; activations are transient, see stage_bytes()).
int64_t layer_bytes(const Layer& layer, int64_t micro_batch, bool training);

/// The input of one forward pass over a whole image of `extent` (axis order (y, x) or
/// (z, y, x)): per axis the smallest valid input side whose output (input − 2ε) covers the
/// axis. Read from −ε (reflect-padded), it is the frame that exact tiling and streaming both
/// reproduce. `same` padding: the extent rounded up to the alignment.
Index unet_whole_input(const UNetOptions& o, const Index& extent);

}  // namespace tessera
