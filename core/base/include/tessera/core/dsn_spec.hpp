#pragma once
// DsnOptions describes a Domain Separation Network for segmentation (Bousmalis et al. 2016)
// built from a U-Net (unet_spec.hpp): torch-free, for the config reader, `tessera model-info`
// and checkpoints; core/dsn.hpp builds the network.
//
// Architecture, for D domains (domain 0 the labelled source, 1 … D−1 unlabelled targets) and
// a `same`-padding U-Net of L levels and f filters (code channels C = f·2^(L−1)):
//   shared encoder   E_c   the U-Net's encoder; its deepest activation is the shared code h_c
//   private encoder  E_p^d one per domain: L conv blocks of p·2^ℓ filters (the last one C),
//                          2^D max pooling between them, giving the private code h_p (C channels)
//   shared decoder   D_r   reconstruction from h_c + h_p: up-sampling steps and conv blocks of
//                          r·2^ℓ filters (no skips), then a 1×1 convolution to the input channels
//   task path              the U-Net's decoder and head on h_c, with the shared encoder's skips
//   domain classifier      per encoder level ℓ, at every position: 1×1 conv (hidden) → ReLU →
//                          1×1 conv (D logits)
// Inference on any domain runs the task path, i.e. exactly the U-Net (no private part).
//
// Segmentation differs from the paper's classification in one place: the task decoder reads
// the shared encoder at every level (its skips), not only h_c, so the similarity loss aligns
// every level the decoder consumes: DANN classifies the domain at every position of every
// level (as Hoffman et al.'s FCNs in the wild do at one), MMD compares the samples' vectors of
// per-level spatial means. Aligning the pooled h_c alone left the skips — where a sensor's
// band response and haze live — domain-specific (measured: no gain on the sample scene).
//
// Loss of one step, the sum over domains of the single-device DSN:
//   L = L_task(source) + α Σ_d L_recon(d) + β Σ_d L_difference(d) + γ L_similarity
// with L_task any segmentation loss (losses.hpp), L_recon the scale-invariant MSE,
// L_difference ‖Ĥ_cᵀ Ĥ_p / M‖²_F and L_similarity either DANN (domain classifier behind a
// gradient-reversal layer, λ from DANN's schedule, the cross-entropy averaged over every
// position of every domain's samples, then over the L levels) or MMD (Σ over targets of the
// multi-kernel MMD² between the source's and that target's per-level mean vectors).
// Formulas in dsn_losses.hpp.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/unet_spec.hpp"

namespace tessera {

enum class Similarity { kDann, kMmd };
std::string to_string(Similarity s);
Similarity parse_similarity(const std::string& s);  ///< "dann" or "mmd"; throws naming the value
// Text of the enum for the options binding (options_binding.hpp).
inline void parse_value(const std::string& s, Similarity& v) { v = parse_similarity(s); }
inline std::string value_name(Similarity v) { return to_string(v); }

struct DsnOptions {
  int domains = 2;                 ///< D: 1 source + targets (set from the data)
  int private_filters = 8;         ///< p: filters of a private encoder's first level
  int recon_filters = 8;           ///< r: filters of the reconstruction decoder's first level
  int classifier_hidden = 64;      ///< hidden units of the domain classifier (per level)
  double alpha = 0.1;              ///< weight of the reconstruction loss
  double beta = 0.05;              ///< weight of the difference loss
  double gamma = 0.1;              ///< weight of the similarity loss
  Similarity similarity = Similarity::kDann;
  std::vector<double> mmd_sigmas = {1, 2, 4, 8, 16};  ///< MMD Gaussian bandwidths (code units)

  /// Throws tessera::Error naming the bad field ("model.dsn.alpha: …"); `unet` must be a
  /// `same`-padding U-Net without batch norm (per-domain batches: use group or instance).
  void validate(const UNetOptions& unet) const;
  bool operator==(const DsnOptions&) const = default;
};

/// Channels of the shared (and private) code: f·2^(L−1).
int64_t dsn_code_channels(const UNetOptions& unet);
/// Parameters of one private encoder, of the reconstruction decoder and of the classifier.
int64_t dsn_private_parameter_count(const UNetOptions& unet, const DsnOptions& dsn);
int64_t dsn_recon_parameter_count(const UNetOptions& unet, const DsnOptions& dsn);
int64_t dsn_classifier_parameter_count(const UNetOptions& unet, const DsnOptions& dsn);
/// Length of a sample's pooled vector (the per-level spatial means): Σ_ℓ f·2^ℓ.
int64_t dsn_pooled_channels(const UNetOptions& unet);

template <class V>
void fields(DsnOptions& o, V& v) {
  v.field("private_filters", o.private_filters, "Filters of each private encoder's first level (doubling per level)");
  v.field("recon_filters", o.recon_filters, "Filters of the reconstruction decoder's first level");
  v.field("classifier_hidden", o.classifier_hidden, "Hidden units of the domain classifier (DANN)");
  v.field("alpha", o.alpha, "Weight of the reconstruction loss (scale-invariant MSE)");
  v.field("beta", o.beta, "Weight of the difference loss between shared and private codes");
  v.field("gamma", o.gamma, "Weight of the similarity loss");
  v.field("similarity", o.similarity, "dann (domain classifier + gradient reversal) or mmd");
  v.field("mmd_sigmas", o.mmd_sigmas, "Gaussian kernel bandwidths of the MMD");
}

}  // namespace tessera
