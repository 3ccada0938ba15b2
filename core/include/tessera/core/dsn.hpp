#pragma once
// The Domain Separation Network for segmentation (dsn_spec.hpp) as LibTorch modules. The
// shared part is a `same`-padding UNet (encoder, decoder, head: the task path, saved as a
// plain U-Net so inference needs nothing else) plus DsnParts: the private encoders of the
// domains this process trains, the shared reconstruction decoder and the domain classifier.
//
// Under domain parallelism each rank builds only its own domains' private encoders, so its
// memory does not grow with the number of domains. Every part is initialised from its own
// seed (seed for the U-Net, seed + 1 + d for private encoder d, seed + 1001 for the decoder,
// seed + 1002 for the classifier), so a private encoder is the same whichever ranks build it.
// Parameter names: the U-Net's (enc0.conv0.weight …), and in DsnParts private<d>.enc<ℓ>…,
// recon.up<ℓ>…, recon.dec<ℓ>…, recon.out…, classifier.level<ℓ>_fc0…, classifier.level<ℓ>_fc1….
// Not thread safe: one forward at a time.
#include <cstdint>
#include <map>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "tessera/core/dsn_spec.hpp"
#include "tessera/core/unet.hpp"

namespace tessera {

/// E_p: L conv blocks with 2^D max pooling between, to the code channels.
class PrivateEncoderImpl : public torch::nn::Module {
 public:
  PrivateEncoderImpl(const UNetOptions& unet, const DsnOptions& dsn);
  torch::Tensor forward(torch::Tensor x);
  /// Levels [first, last] alone: `x` is level `first`'s input (forward == levels 0 … L − 1).
  torch::Tensor forward_levels(int first, int last, torch::Tensor x);

 private:
  std::vector<ConvBlock> blocks_;
};
TORCH_MODULE(PrivateEncoder);

/// D_r: from a code back to the input's channels and size (up-sampling steps, conv blocks, 1×1).
class ReconstructionDecoderImpl : public torch::nn::Module {
 public:
  ReconstructionDecoderImpl(const UNetOptions& unet, const DsnOptions& dsn);
  torch::Tensor forward(torch::Tensor code);

 private:
  UNetOptions unet_;
  std::vector<ConvNd> ups_;
  std::vector<ConvBlock> blocks_;
  ConvNd out_{nullptr};
};
TORCH_MODULE(ReconstructionDecoder);

/// Per level ℓ of the shared encoder, at every position: 1×1 convolution → ReLU → 1×1
/// convolution, one logit per domain (N, D, spatial of level ℓ).
class DomainClassifierImpl : public torch::nn::Module {
 public:
  DomainClassifierImpl(const UNetOptions& unet, const DsnOptions& dsn);
  std::vector<torch::Tensor> forward(const std::vector<torch::Tensor>& levels);

 private:
  std::vector<ConvNd> hidden_, out_;
};
TORCH_MODULE(DomainClassifier);

/// Everything of the DSN beyond the U-Net, for the domains `owned` (global ids, ascending).
class DsnPartsImpl : public torch::nn::Module {
 public:
  DsnPartsImpl(const UNetOptions& unet, const DsnOptions& dsn, const std::vector<int>& owned, uint64_t seed);
  PrivateEncoder& private_encoder(int domain);  ///< aborts when not owned (a bug)
  const std::vector<int>& owned() const { return owned_; }
  /// The parameters of private encoder `domain`.
  std::vector<torch::Tensor> private_parameters(int domain);
  /// Decoder and classifier parameters (shared by every domain).
  std::vector<torch::Tensor> shared_parameters();
  ReconstructionDecoder recon{nullptr};
  DomainClassifier classifier{nullptr};

 private:
  std::vector<int> owned_;
  std::map<int, PrivateEncoder> private_;
};
TORCH_MODULE(DsnParts);

/// What one domain's batch gives.
struct DsnOutputs {
  torch::Tensor logits;          ///< task logits (only when asked for)
  torch::Tensor shared_code;     ///< h_c (N, C, spatial / 2^(L−1))
  torch::Tensor private_code;    ///< h_p, same shape
  torch::Tensor reconstruction;  ///< D_r(h_c + h_p), the input's shape
  /// The shared encoder's output at every level ℓ = 0 … L−1 (the skips the task decoder
  /// consumes, then h_c): what the similarity loss aligns across domains.
  std::vector<torch::Tensor> levels;
  /// Spatial means of the levels, concatenated (N, Σ_ℓ f·2^ℓ). Under a DecompositionScope
  /// (spatial parallelism) the whole tile's means, with this block's share of their gradient.
  torch::Tensor pooled;
};

/// What the encoders hand on from one level to the next (a DSN's pipeline stage boundary):
/// the shared path (the U-Net encoder's), the private path and the shared skips so far.
struct DsnCodes {
  torch::Tensor shared;
  torch::Tensor private_code;
  std::map<int, torch::Tensor> skips;  ///< by the U-Net's skip index
};

class DsnImpl : public torch::nn::Module {
 public:
  /// Validates both options (throws tessera::Error).
  DsnImpl(UNetOptions unet, DsnOptions dsn, std::vector<int> owned, uint64_t seed);
  /// Cubic tiles (the trainer's); `task` = also run the U-Net decoder and head. Under a
  /// DecompositionScope `x` is this rank's block of the tiles and so are the outputs.
  DsnOutputs forward(const torch::Tensor& x, int domain, bool task);
  /// forward() in parts, as pipeline stages run it: start (the input both encoders take),
  /// encoder levels [first, last] of the shared and `domain`'s private encoder, and after the
  /// deepest level the heads (decoders, levels, pooled codes). Bit-identical to forward().
  DsnCodes start(const torch::Tensor& x) const;
  void encode_levels(int first, int last, DsnCodes& codes, int domain);
  DsnOutputs heads(DsnCodes codes, bool task);
  /// Shared parameters: the U-Net's, the decoder's and the classifier's.
  std::vector<torch::Tensor> shared_parameters();
  /// Channels-last convolution weights everywhere and channels-last input (train.channels_last),
  /// as UNetImpl::use_channels_last does for the U-Net alone.
  void use_channels_last();
  UNet unet{nullptr};
  DsnParts parts{nullptr};
  const DsnOptions& options() const { return dsn_; }

 private:
  DsnOptions dsn_;
  bool channels_last_ = false;
};
TORCH_MODULE(Dsn);

}  // namespace tessera
