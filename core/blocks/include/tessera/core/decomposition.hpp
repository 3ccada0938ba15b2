#pragma once
// How the building blocks see a spatial decomposition: one image (tile or whole volume) split
// into blocks along its spatial axes, one block per rank, every rank running the same
// network on its block. While a DecompositionScope is active on a thread, the blocks of
// unet_blocks.hpp compute the one-image result on each block:
//   - a stride-1 convolution with `same` padding (K−1)/2 pads its input with the
//     neighbours' edges (Decomposition::convolve: zeros only at the image's border) and then
//     convolves without padding; a K > 1 convolution without padding (`valid`) refuses;
//   - a normalisation takes its statistics over the whole image (two passes: the global
//     mean, then the global sum of squared deviations), batch norm over the whole batch;
//   - pooling, transposed 2× convolution, up-sampling, 1×1 convolutions and concatenation
//     stay rank-local: exact when every block starts on a multiple of 2^(levels−1), which the
//     decomposition guarantees (parallel/spatial.hpp).
// Everything a Decomposition returns is differentiable, so backward through a decomposed
// forward gives each rank its share of the one-image gradients (the halo's gradient goes
// back to its owner and is added there; the sums' gradients are summed).
//
// The scope is thread-local and lives in one shared library (tessera_decomposition), so
// the host and every plugin see the same scope. The communication itself is parallel/'s
// (SpatialDecomposition); this header needs only LibTorch's tensor type.
#include <cstdint>

#include <torch/types.h>

#define TESSERA_DECOMPOSITION_API __attribute__((visibility("default")))

namespace tessera {

class Decomposition {
 public:
  virtual ~Decomposition() = default;
  /// The stride-1 convolution of x (N × C × block...) with `weight`, `bias` and `same` padding
  /// `width` across the blocks: x padded by `width` on both sides of every spatial axis with
  /// the neighbouring blocks' edges (zeros at the image's border), convolved without padding.
  /// Backward keeps x and the received halo slabs only (not the padded copy), as one process
  /// keeps x.
  virtual torch::Tensor convolve(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                 int64_t width) const = 0;
  /// Element-wise sum of `x` over the blocks of one image (same shape on every rank).
  virtual torch::Tensor image_sum(const torch::Tensor& x) const = 0;
  /// Element-wise sum over every block of every image of the batch statistics' group: the
  /// blocks, and the data-parallel replicas when batch norm is synchronised.
  virtual torch::Tensor batch_sum(const torch::Tensor& x) const = 0;
};

/// The decomposition active on this thread, or nullptr (one process, one image).
TESSERA_DECOMPOSITION_API const Decomposition* active_decomposition();

/// The mean over the spatial axes of x (N × C × spatial...), N × C: one process's mean, or
/// under an active decomposition the whole image's (the blocks' sums and pixel counts summed
/// over the ranks, differentiable), so a global average pooling (a Squeeze-and-Excitation
/// block's squeeze) decomposes exactly. A plugin layer that needs the whole image in some way
/// this does not cover refuses an active decomposition instead (std::invalid_argument naming
/// itself, as seed_unet does), so `--sp` refuses the model rather than train it wrong.
TESSERA_DECOMPOSITION_API torch::Tensor global_average_pool(const torch::Tensor& x);

/// Makes `d` active on this thread for the scope's lifetime (scopes nest; the previous one
/// comes back on destruction). `d` must outlive the scope.
class TESSERA_DECOMPOSITION_API DecompositionScope {
 public:
  explicit DecompositionScope(const Decomposition& d);
  ~DecompositionScope();
  DecompositionScope(const DecompositionScope&) = delete;
  DecompositionScope& operator=(const DecompositionScope&) = delete;

 private:
  const Decomposition* previous_;
};

}  // namespace tessera
