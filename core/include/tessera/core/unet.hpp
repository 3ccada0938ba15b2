#pragma once
// The network every command runs: the built-in U-Net family as a LibTorch module, one
// implementation for 2-D and 3-D — or, when options.name is not "unet", any model of the
// registry (model_registry.hpp; plugins such as the SE-U-Net) built by its factory and held
// as the submodule "model" (parameter names model.enc0…). Training, inference, checkpoints,
// eval and export go through this one handle either way. Pipeline stages walk a layer
// sequence (layer_sequence()): the built-in U-Net's, or the one a registry model declares
// (plugin.hpp, LayerLayout: the SE-U-Net is core's U-Net shape with an SE tail per block);
// a registry model that declares none is refused there with a message. The DSN's
// encode/decode needs the built-in U-Net.
// Input NCHW or NCDHW float, output logits N × classes × spatial. For `valid` padding the
// spatial output is smaller by 2ε (unet_spec.hpp) and the input side must be valid
// (unet_output_size). Parameter names are stable (enc0.conv0.weight …, up0.weight, head.weight)
// so checkpoints and exports keep their meaning. Not thread safe: one forward at a time.
//
// The forward is written once: it walks the layer sequence (layer_sequence.hpp), the same
// walk a pipeline stage (unet_stages.hpp) runs over its range of layers.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/unet_blocks.hpp"
#include "tessera/core/unet_spec.hpp"
#include "tessera/plugin.hpp"

namespace tessera {

/// The modules one layer of a LayerSequence runs: its convolution (conv, up, head), its
/// normalisation (norm) or its block tail (tail); all empty for the parameter-free layers.
struct LayerModules {
  ConvNd conv{nullptr};
  NormNd norm{nullptr};
  std::shared_ptr<BlockTailImpl> tail;  ///< a block tail (kTail)
};

class UNetImpl : public torch::nn::Module {
 public:
  /// Validates the options (throws tessera::Error) and initialises weights (Kaiming normal,
  /// from the current torch seed).
  explicit UNetImpl(UNetOptions options);
  torch::Tensor forward(torch::Tensor x);
  /// The encoder alone, for the DSN: layers up to the deepest level's last activation (the
  /// code), keeping in `skips` (by skip index) what decode() consumes. `same` padding, input
  /// sides equal on every axis. decode(encode(x, s), s) == forward(x).
  torch::Tensor encode(torch::Tensor x, std::map<int, torch::Tensor>& skips);
  /// The decoder and head on encode()'s code and skips.
  torch::Tensor decode(torch::Tensor code, const std::map<int, torch::Tensor>& skips);
  const UNetOptions& options() const { return options_; }
  /// Whether the network presents a layer sequence that pipeline stages cut: the built-in
  /// U-Net, or a registry model that declares one (plugin.hpp, LayerLayout).
  bool layer_sequence_available() const { return options_.is_builtin() || layout_.has_value(); }
  /// The layer sequence for cubic input tiles of side `input_side`, layer names the modules'
  /// paths (model.enc0.conv0 … for a registry model, with its block tails). Throws
  /// tessera::Error naming the model when it declares none, or when a parameter of the model
  /// lies in no declared layer (a layer a stage could not hold), naming the parameter.
  LayerSequence layer_sequence(int64_t input_side) const;
  /// Batch norm layers take their training statistics over all replicas (see NormNdImpl).
  void synchronise_batch_norm(const ReplicaSum& sum);
  /// Stores weights and runs activations channels-last (NHWC / NDHWC), the faster layout for
  /// CPU convolutions here; results are unchanged up to float rounding. For inference.
  void use_channels_last();
  /// Back to the default contiguous (NCHW / NCDHW) layout, e.g. after a validation pass.
  void use_contiguous();
  bool channels_last() const { return channels_last_; }
  /// Where the weights are (the device inference and training move their batches to); CPU
  /// for a network without parameters.
  torch::Device device() const;

 private:
  UNetOptions options_;
  bool channels_last_ = false;
  // A registry model (options_.name != "unet"): its module and forward. Empty for the U-Net.
  std::shared_ptr<torch::nn::Module> model_;
  std::function<torch::Tensor(const torch::Tensor&)> model_forward_;
  std::optional<LayerLayout> layout_;  // what the registry model declares (plugin.hpp)
  LayerSequence layers_;  // the forward's order and skips (sizes: the smallest valid input, unused)
  std::vector<LayerModules> modules_;  // by layer index
  LayerSequence sequence_for(const torch::Tensor& x) const;
};
TORCH_MODULE(UNet);

/// The decoder's up-sampling convolution of `o` from level ℓ + 1 (`in` channels) to level ℓ
/// (`out`): transposed 2^D with stride 2, or the 1×1 convolution before nearest up-sampling.
ConvNd up_convolution(const UNetOptions& o, int64_t in, int64_t out);

/// Centre crop of x's spatial axes to `like`'s spatial sizes.
torch::Tensor center_crop(const torch::Tensor& x, const torch::Tensor& like);

/// The modules of layers [first, last] of `seq`, found in `root` under the layers' names
/// (enc0.conv0, up1, head …); index i − first. Aborts when one is missing (a bug).
std::vector<LayerModules> find_layer_modules(const torch::nn::Module& root, const LayerSequence& seq, int first,
                                             int last);

/// The U-Net forward over layers [first, last] of `seq`, running `modules` (find_layer_modules
/// of the same range; batch norm updates its running statistics). `x` enters layer `first`;
/// `skips_in` holds, by skip index, the skips consumed here and produced before `first`,
/// already cropped; skips produced here and consumed after `last` are added to `skips_out`,
/// centre-cropped to the consumer's side. Returns the output of layer `last`.
/// UNetImpl::forward is this over all layers; UNetStageImpl::forward over its range.
torch::Tensor run_layers(const LayerSequence& seq, int first, int last, std::vector<LayerModules>& modules,
                         torch::Tensor x, const std::map<int, torch::Tensor>& skips_in,
                         std::map<int, torch::Tensor>& skips_out);

}  // namespace tessera
