#include "tessera/parallel/modes/spatial.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/unet_blocks.hpp"

namespace tessera::parallel {
namespace {

constexpr int kForwardTag = 7100, kBackwardTag = 7200;

// y = stride-1 convolution of the halo-exchanged x, without padding. Backward keeps x (which
// the layer before keeps anyway) and the received halo slabs, not the padded copy: it
// rebuilds the padded input from them, then sends the input gradient's halo back (adjoint).
struct HaloConvolutionFunction : torch::autograd::Function<HaloConvolutionFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias, const SpatialDecomposition* d,
                               int64_t width) {
    std::vector<torch::Tensor> received;
    const torch::Tensor padded = d->exchange_recording(x.detach(), width, &received);
    const std::vector<int64_t> one(size_t(x.dim() - 2), 1), zero(size_t(x.dim() - 2), 0);
    torch::Tensor y = torch::convolution(padded, weight, bias, one, zero, one, false, zero, 1);
    std::vector<torch::Tensor> saved{x, weight};
    saved.insert(saved.end(), received.begin(), received.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["d"] = reinterpret_cast<int64_t>(d);
    ctx->saved_data["width"] = width;
    ctx->saved_data["input_grad"] = x.requires_grad();
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1];
    const std::vector<torch::Tensor> received(saved.begin() + 2, saved.end());
    const auto* d = reinterpret_cast<const SpatialDecomposition*>(ctx->saved_data["d"].toInt());
    const int64_t width = ctx->saved_data["width"].toInt();
    const bool input_grad = ctx->saved_data["input_grad"].toBool();
    const torch::Tensor padded = d->rebuild(x, width, received);
    const std::vector<int64_t> one(size_t(x.dim() - 2), 1), zero(size_t(x.dim() - 2), 0);
    const std::vector<int64_t> bias_sizes{weight.size(0)};
    auto [grad_padded, grad_weight, grad_bias] =
        at::convolution_backward(grads[0].contiguous(), padded, weight, bias_sizes, one, zero, one, false, zero, 1,
                                 {input_grad, true, true});
    torch::Tensor grad_x = input_grad ? d->exchange_adjoint(grad_padded, width) : torch::Tensor();
    return {grad_x, grad_weight, grad_bias, torch::Tensor(), torch::Tensor()};
  }
};

// In place: t summed over each group in turn (ReplicaSum, unet_blocks.hpp).
ReplicaSum sum_over(std::vector<Communicator*> groups) {
  return [groups = std::move(groups)](torch::Tensor& t) {
    for (Communicator* g : groups)
      if (g->size() > 1) g->allreduce(t, ReduceOp::kSum);
  };
}

}  // namespace

SpatialDecomposition::SpatialDecomposition(Communicator& spatial, SpatialMesh mesh, Communicator* replicas)
    : spatial_(spatial), mesh_(std::move(mesh)), replicas_(replicas) {
  if (mesh_.size() != spatial_.size())
    throw Error("--sp-mesh " + mesh_.describe() + " has " + std::to_string(mesh_.size()) + " blocks, but --sp is " +
                std::to_string(spatial_.size()));
  coords_ = mesh_.coordinates(spatial_.rank());
  sum_image_ = sum_over({&spatial_});
  sum_batch_ = replicas_ != nullptr ? sum_over({&spatial_, replicas_}) : sum_image_;
}

Block SpatialDecomposition::block(const std::vector<int64_t>& sides, int64_t alignment, int rank) const {
  if (static_cast<int>(sides.size()) != mesh_.dims())
    throw Error("spatial: a " + std::to_string(sides.size()) + "-D image on a " + std::to_string(mesh_.dims()) +
                "-D mesh");
  const std::vector<int> c = mesh_.coordinates(rank);
  Block b;
  for (int a = 0; a < mesh_.dims(); ++a) {
    const auto offsets =
        block_offsets(sides[size_t(a)], mesh_.parts[size_t(a)], alignment, "spatial axis " + std::to_string(a));
    b.begin.push_back(offsets[size_t(c[size_t(a)])]);
    b.extent.push_back(offsets[size_t(c[size_t(a)]) + 1] - offsets[size_t(c[size_t(a)])]);
  }
  return b;
}

void SpatialDecomposition::check_halo_fits(const std::vector<int64_t>& sides, int64_t alignment,
                                           int64_t halo) const {
  for (int r = 0; r < mesh_.size(); ++r) {
    const Block b = block(sides, alignment, r);
    for (int a = 0; a < mesh_.dims(); ++a)
      if (mesh_.parts[size_t(a)] > 1 && b.extent[size_t(a)] / alignment < halo)
        throw Error("spatial axis " + std::to_string(a) + ": side " + std::to_string(sides[size_t(a)]) + " over " +
                    std::to_string(mesh_.parts[size_t(a)]) + " blocks leaves a block of " +
                    std::to_string(b.extent[size_t(a)]) + ", thinner than the halo of " + std::to_string(halo) +
                    " at the deepest level (use fewer spatial ranks or a larger tile)");
  }
}

torch::Tensor SpatialDecomposition::scatter(const torch::Tensor& image, int first_axis, int64_t alignment) const {
  std::vector<int64_t> sides;
  for (int64_t d = first_axis; d < image.dim(); ++d) sides.push_back(image.size(d));
  const Block b = block(sides, alignment);
  torch::Tensor out = image;
  for (int a = 0; a < mesh_.dims(); ++a) out = out.narrow(first_axis + a, b.begin[size_t(a)], b.extent[size_t(a)]);
  return out;
}

torch::Tensor SpatialDecomposition::gather(const torch::Tensor& block_tensor, const std::vector<int64_t>& sides,
                                           int first_axis, int64_t alignment) const {
  // Every block padded to the largest block, gathered at once, then cut into place.
  std::vector<int64_t> largest(sides.size(), 0);
  for (int r = 0; r < mesh_.size(); ++r) {
    const Block b = block(sides, alignment, r);
    for (size_t a = 0; a < sides.size(); ++a) largest[a] = std::max(largest[a], b.extent[a]);
  }
  std::vector<int64_t> padded_shape = block_tensor.sizes().vec();
  for (size_t a = 0; a < sides.size(); ++a) padded_shape[size_t(first_axis) + a] = largest[a];
  torch::Tensor padded = torch::zeros(padded_shape, block_tensor.options());
  torch::Tensor place = padded;
  for (int a = 0; a < mesh_.dims(); ++a) place = place.narrow(first_axis + a, 0, block_tensor.size(first_axis + a));
  place.copy_(block_tensor);
  const torch::Tensor all = spatial_.allgather(padded);
  std::vector<int64_t> shape = block_tensor.sizes().vec();
  for (size_t a = 0; a < sides.size(); ++a) shape[size_t(first_axis) + a] = sides[a];
  torch::Tensor image = torch::empty(shape, block_tensor.options());
  for (int r = 0; r < mesh_.size(); ++r) {
    const Block b = block(sides, alignment, r);
    torch::Tensor from = all[r], to = image;
    for (int a = 0; a < mesh_.dims(); ++a) {
      from = from.narrow(first_axis + a, 0, b.extent[size_t(a)]);
      to = to.narrow(first_axis + a, b.begin[size_t(a)], b.extent[size_t(a)]);
    }
    to.copy_(from);
  }
  return image;
}

int SpatialDecomposition::neighbour(int axis, int step) const {
  std::vector<int> c = coords_;
  c[size_t(axis)] += step;
  return mesh_.rank_of(c);
}

torch::Tensor SpatialDecomposition::exchange(const torch::Tensor& x, int64_t width) const {
  return exchange_recording(x, width, nullptr);
}

torch::Tensor SpatialDecomposition::exchange_recording(const torch::Tensor& x, int64_t width,
                                                       std::vector<torch::Tensor>* received) const {
  if (x.dim() != mesh_.dims() + 2)
    throw Error("spatial: halo exchange of a " + std::to_string(x.dim() - 2) + "-D tensor on a " +
                std::to_string(mesh_.dims()) + "-D mesh");
  torch::Tensor y = x.contiguous();
  for (int a = 0; a < mesh_.dims(); ++a) {
    const int64_t dim = 2 + a, n = y.size(dim);
    torch::Tensor from_left = torch::empty({0}), from_right = torch::empty({0});  // none: zeros
    if (mesh_.parts[size_t(a)] > 1) {
      if (n < width)
        throw Error("spatial: a block of " + std::to_string(n) + " along axis " + std::to_string(a) +
                    " is thinner than the halo of " + std::to_string(width) + " (use fewer spatial ranks)");
      const int left = neighbour(a, -1), right = neighbour(a, +1);
      std::vector<int64_t> shape = y.sizes().vec();
      shape[size_t(dim)] = width;
      torch::Tensor in_left = torch::empty(shape, y.options()), in_right = torch::empty(shape, y.options());
      const torch::Tensor last = y.narrow(dim, n - width, width).contiguous();
      const torch::Tensor first = y.narrow(dim, 0, width).contiguous();
      spatial_.sendrecv(last, right, in_left, left, kForwardTag + 2 * a);
      spatial_.sendrecv(first, left, in_right, right, kForwardTag + 2 * a + 1);
      if (left >= 0) from_left = in_left;
      if (right >= 0) from_right = in_right;
      bytes_forward_ += ((left >= 0) + (right >= 0)) * last.numel() * last.element_size();
    }
    y = padded_along(y, dim, width, from_left, from_right);
    if (received != nullptr) {
      received->push_back(from_left);
      received->push_back(from_right);
    }
  }
  return y;
}

torch::Tensor SpatialDecomposition::rebuild(const torch::Tensor& x, int64_t width,
                                            const std::vector<torch::Tensor>& received) const {
  torch::Tensor y = x.contiguous();
  for (int a = 0; a < mesh_.dims(); ++a)
    y = padded_along(y, 2 + a, width, received[size_t(2 * a)], received[size_t(2 * a + 1)]);
  return y;
}

torch::Tensor SpatialDecomposition::padded_along(const torch::Tensor& y, int64_t dim, int64_t width,
                                                 const torch::Tensor& from_left, const torch::Tensor& from_right) {
  const int64_t n = y.size(dim);
  std::vector<int64_t> shape = y.sizes().vec();
  shape[size_t(dim)] = n + 2 * width;
  torch::Tensor out = torch::zeros(shape, y.options());
  out.narrow(dim, width, n).copy_(y);
  if (from_left.numel() > 0) out.narrow(dim, 0, width).copy_(from_left);
  if (from_right.numel() > 0) out.narrow(dim, n + width, width).copy_(from_right);
  return out;
}

torch::Tensor SpatialDecomposition::exchange_adjoint(const torch::Tensor& padded, int64_t width) const {
  torch::Tensor g = padded.contiguous();
  for (int a = mesh_.dims() - 1; a >= 0; --a) {
    const int64_t dim = 2 + a, n = g.size(dim) - 2 * width;
    torch::Tensor inner = g.narrow(dim, width, n).clone();
    if (mesh_.parts[size_t(a)] > 1) {
      const int left = neighbour(a, -1), right = neighbour(a, +1);
      // My left halo is my left neighbour's last slices: its gradient goes back there.
      const torch::Tensor to_left = g.narrow(dim, 0, width).contiguous();
      const torch::Tensor to_right = g.narrow(dim, n + width, width).contiguous();
      torch::Tensor from_left = torch::empty_like(to_left), from_right = torch::empty_like(to_right);
      spatial_.sendrecv(to_right, right, from_left, left, kBackwardTag + 2 * a);
      spatial_.sendrecv(to_left, left, from_right, right, kBackwardTag + 2 * a + 1);
      if (left >= 0) inner.narrow(dim, 0, width).add_(from_left);
      if (right >= 0) inner.narrow(dim, n - width, width).add_(from_right);
      bytes_backward_ += ((left >= 0) + (right >= 0)) * to_left.numel() * to_left.element_size();
    }
    g = inner;
  }
  return g;
}

torch::Tensor SpatialDecomposition::convolve(const torch::Tensor& x, const torch::Tensor& weight,
                                             const torch::Tensor& bias, int64_t width) const {
  return HaloConvolutionFunction::apply(x, weight, bias, this, width);
}

torch::Tensor SpatialDecomposition::image_sum(const torch::Tensor& x) const { return sum_across_ranks(x, sum_image_); }

torch::Tensor SpatialDecomposition::batch_sum(const torch::Tensor& x) const { return sum_across_ranks(x, sum_batch_); }

}  // namespace tessera::parallel
