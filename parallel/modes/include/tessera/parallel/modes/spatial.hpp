#pragma once
// Spatial parallelism: one image (a training tile or a whole volume) split into blocks along
// its spatial axes, one block per rank of the spatial group (ProcessGrid::spatial()), every
// rank running the same network on its block under a DecompositionScope
// (core/decomposition.hpp). The result — forward output, loss, input and weight gradients — is
// the one-process result, up to float rounding (tests/parallel/spatial_test.cpp).
//
// The mesh: `parts[a]` blocks along spatial axis a (1-D split: {P, 1, …}; 2 × 2; 2 × 2 × 1 …),
// ranks numbered row-major (the last axis fastest). Along an axis of S elements, blocks are
// whole multiples of an alignment A (2^(levels−1) for a U-Net, so every block starts on a
// multiple of every pooling factor and pooling / up-sampling need no halo): S / A units shared
// as evenly as possible, the first blocks one unit larger when they do not divide (uneven
// blocks). S must be a multiple of A and hold at least one unit per block.
//
// The halo exchange pads a block by w on both sides of every axis, one axis after the other:
// along axis a the block, already padded along the axes before a, sends its first and last w
// slices to its two neighbours (non-blocking send and receive posted together), so corner
// and edge halos arrive without diagonal messages. Zeros at the image border. Backward runs
// the axes in reverse: the halo's gradient goes back to its owner and is ADDED to the
// owner's edge; the exchange is linear and its backward is its adjoint (tested: ⟨F x, y⟩ =
// ⟨x, F* y⟩).
//
// Sums (normalisation statistics) are allreduces whose backward is the allreduce of the
// gradients: every rank consumes the sum differently (it normalises its own block).
// Not thread safe: one forward/backward at a time; the Communicators must outlive it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/decomposition.hpp"
#include "tessera/core/spatial_mesh.hpp"
#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {

/// One rank's block of an image: start and extent per spatial axis.
struct Block {
  std::vector<int64_t> begin, extent;
};

class SpatialDecomposition final : public Decomposition {
 public:
  /// `spatial`: the ranks sharing an image (size == mesh.size()); `replicas`: the
  /// data-parallel group whose batch statistics are synchronised (batch norm), or nullptr.
  SpatialDecomposition(Communicator& spatial, SpatialMesh mesh, Communicator* replicas = nullptr);

  const SpatialMesh& mesh() const { return mesh_; }
  int rank() const { return spatial_.rank(); }
  const std::vector<int>& coordinates() const { return coords_; }
  /// The ranks sharing an image (what a trainer sums block statistics and gradients over).
  Communicator& group() const { return spatial_; }

  /// Spatial rank `rank`'s block of an image with `sides` (one per mesh axis).
  Block block(const std::vector<int64_t>& sides, int64_t alignment, int rank) const;
  Block block(const std::vector<int64_t>& sides, int64_t alignment) const { return block(sides, alignment, rank()); }
  /// Throws tessera::Error (the same on every rank, before any exchange) when some rank's
  /// block, at the deepest level (extent / alignment), is thinner than `halo`: that rank could
  /// not fill its neighbours' halos. Kernel 3 (halo 1) always fits.
  void check_halo_fits(const std::vector<int64_t>& sides, int64_t alignment, int64_t halo) const;
  /// This rank's block of `image`, whose spatial axes start at dimension `first_axis`
  /// (2 for N × C × spatial, 1 for labels N × spatial). A view; no communication.
  torch::Tensor scatter(const torch::Tensor& image, int first_axis, int64_t alignment) const;
  /// The whole image from every rank's block (collective; every rank gets it): inverse of scatter.
  torch::Tensor gather(const torch::Tensor& block, const std::vector<int64_t>& sides, int first_axis,
                       int64_t alignment) const;

  torch::Tensor convolve(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                         int64_t width) const override;
  torch::Tensor image_sum(const torch::Tensor& x) const override;
  torch::Tensor batch_sum(const torch::Tensor& x) const override;

  /// Bytes this rank sent in halo exchanges, forward and backward, since construction.
  int64_t halo_bytes_forward() const { return bytes_forward_; }
  int64_t halo_bytes_backward() const { return bytes_backward_; }

  /// The halo exchange without autograd: `x` padded by `width` on both sides of every spatial
  /// axis, the neighbours' edges where there is a neighbour, zeros at the image's border
  /// (convolve() runs it; public for the exchange and adjoint tests).
  torch::Tensor exchange(const torch::Tensor& x, int64_t width) const;
  /// The adjoint of exchange(): the gradient of a padded block back to the block, halo parts
  /// sent to their owners and added to their edges.
  torch::Tensor exchange_adjoint(const torch::Tensor& padded, int64_t width) const;
  /// exchange(), also handing out what it received: per axis (left, right), an empty tensor
  /// where there is no neighbour (zeros).
  torch::Tensor exchange_recording(const torch::Tensor& x, int64_t width, std::vector<torch::Tensor>* received) const;
  /// exchange()'s result again from `x` and what exchange_recording received, without communication.
  torch::Tensor rebuild(const torch::Tensor& x, int64_t width, const std::vector<torch::Tensor>& received) const;

 private:
  int neighbour(int axis, int step) const;
  // `y` padded by `width` on both sides of `dim`: the given slabs, zeros where empty.
  static torch::Tensor padded_along(const torch::Tensor& y, int64_t dim, int64_t width, const torch::Tensor& from_left,
                                    const torch::Tensor& from_right);

  Communicator& spatial_;
  SpatialMesh mesh_;
  Communicator* replicas_;
  std::vector<int> coords_;
  // In-place sums (ReplicaSum, unet_blocks.hpp) behind image_sum / batch_sum: over the blocks,
  // and the replicas too for the batch when batch norm is synchronised.
  std::function<void(torch::Tensor&)> sum_image_, sum_batch_;
  mutable int64_t bytes_forward_ = 0, bytes_backward_ = 0;
};

}  // namespace tessera::parallel
