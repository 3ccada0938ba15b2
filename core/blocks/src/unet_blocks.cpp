#include "tessera/core/unet_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include <ATen/autocast_mode.h>
#include <ATen/ops/mkldnn_convolution.h>
#include <torch/torch.h>

#include "tessera/core/decomposition.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/torch_compat.hpp"

namespace tessera {

namespace {

// torch::convolution, except for a stride-1 1×1 convolution of a channels-last fp32 CPU
// tensor. ATen would send it, with one intra-op thread (every data-parallel rank here), to its
// im2col path, which copies input, output and gradients to NCHW and back. Instead:
//   - with gradients, it is the matrix product it is, (positions × in) · (in × out) on the
//     (N, spatial…, C) memory, output channels-last, with a product's backward;
//   - without (inference), oneDNN's 1×1 convolution, faster than that product (unet-tiny's
//     inference 19.7 → 16.2 s, README "Where the time went").
torch::Tensor pointwise_or_convolution(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                       at::IntArrayRef stride, at::IntArrayRef pad) {
  const auto all = [](at::IntArrayRef v, int64_t e) {
    return std::all_of(v.begin(), v.end(), [e](int64_t s) { return s == e; });
  };
  const std::vector<int64_t> dil(stride.size(), 1), outpad(stride.size(), 0);
  const bool channels_last = x.dim() > 3 && x.suggest_memory_format() != at::MemoryFormat::Contiguous;
  if (!channels_last || !x.is_cpu() || x.scalar_type() != at::kFloat || !all(w.sizes().slice(2), 1) ||
      !all(stride, 1) || !all(pad, 0))
    return torch::convolution(x, w, b, stride, pad, dil, false, outpad, 1);
  if (!torch::GradMode::is_enabled() && at::hasMKLDNN()) return at::mkldnn_convolution(x, w, b, pad, stride, dil, 1);
  const torch::Tensor rows = x.movedim(1, -1).reshape({-1, x.size(1)});  // a view: channels are innermost
  const torch::Tensor w2 = w.reshape({w.size(0), w.size(1)}).t();
  const torch::Tensor y = b.defined() ? torch::addmm(b, rows, w2) : torch::mm(rows, w2);
  std::vector<int64_t> shape{x.size(0)};
  for (int64_t d = 2; d < x.dim(); ++d) shape.push_back(x.size(d));
  shape.push_back(w.size(0));
  return y.view(shape).movedim(-1, 1);
}

}  // namespace

ConvNdImpl::ConvNdImpl(int dims, int64_t in, int64_t out, int64_t kernel, int64_t padding,
                       int64_t stride, bool transposed)
    : dims_(dims), padding_(padding), stride_(stride), transposed_(transposed) {
  std::vector<int64_t> shape = transposed ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in};
  for (int d = 0; d < dims; ++d) shape.push_back(kernel);
  weight_ = register_parameter("weight", torch::empty(shape));
  bias_ = register_parameter("bias", torch::zeros({out}));
  // Kaiming normal for ReLU networks (fan_in of the forward convolution).
  const double fan_in = static_cast<double>(in) * std::pow(double(kernel), dims) /
                        (transposed ? std::pow(double(stride), dims) : 1.0);
  torch::NoGradGuard no_grad;
  weight_.normal_(0.0, std::sqrt(2.0 / fan_in));
}

torch::Tensor ConvNdImpl::forward(const torch::Tensor& x) {
  if (const Decomposition* d = active_decomposition(); d && !transposed_ && weight_.size(2) > 1) {
    // Split across ranks: the neighbours' edges (zeros at the image border) replace the padding.
    if (padding_ == 0 || stride_ != 1)
      throw Error("a " + std::to_string(weight_.size(2)) + "^" + std::to_string(dims_) +
                  " convolution without `same` padding cannot be split across ranks: use --padding same");
    return d->convolve(x, weight_, bias_, padding_);
  }
  // Under autocast (mixed-precision training) the convolution runs in autocast's type, as
  // at::conv2d would: torch::convolution is not on autocast's list of operators.
  torch::Tensor input = x, weight = weight_, bias = bias_;
  const c10::DeviceType device = x.device().type();
  if (torch_compat::autocast_enabled(device)) {
    const at::ScalarType t = torch_compat::autocast_dtype(device);
    input = at::autocast::cached_cast(t, x, device);
    weight = at::autocast::cached_cast(t, weight_, device);
    bias = at::autocast::cached_cast(t, bias_, device);
  }
  const std::vector<int64_t> stride(dims_, stride_), pad(dims_, padding_), dil(dims_, 1), outpad(dims_, 0);
  if (transposed_ && (weight.size(2) != stride_ || padding_ != 0))
    return torch::convolution(input, weight, bias, stride, pad, dil, transposed_, outpad, 1);
  if (!transposed_) return pointwise_or_convolution(input, weight, bias, stride, pad);
  // A transposed convolution whose kernel equals its stride touches each output pixel from
  // exactly one input pixel: it is a 1×1 convolution to k^D·out channels followed by a
  // depth-to-space shuffle. Same arithmetic, on the fast convolution path instead of im2col +
  // BLAS. The shuffle is one copy that writes the output in the input's memory format:
  //   - channels-last: channels ordered (k…, out) and the bias folded into the convolution, so
  //     the copy moves whole pixels' channel vectors and the output is channels-last, keeping
  //     the concatenation and the next convolution free of layout copies (a fifth of a
  //     training step otherwise);
  //   - contiguous: channels ordered (out, k…), the bias added after the shuffle.
  const int64_t in = weight.size(0), out = weight.size(1), k = stride_;
  const bool channels_last = input.dim() > 3 && input.suggest_memory_format() != at::MemoryFormat::Contiguous;
  std::vector<int64_t> perm, wshape{-1, in}, kernel_split, one(dims_, 1), zero(dims_, 0);
  if (!channels_last) perm.push_back(1), kernel_split.push_back(out);
  for (int d = 0; d < dims_; ++d) perm.push_back(2 + d), wshape.push_back(1), kernel_split.push_back(k);
  if (channels_last) perm.push_back(1), kernel_split.push_back(out);
  perm.push_back(0);
  const torch::Tensor w = weight.permute(perm).reshape(wshape);
  // z split: (N, k…, out, spatial…) channels-last, (N, out, k…, spatial…) contiguous.
  const torch::Tensor z = pointwise_or_convolution(input, w, channels_last ? bias.repeat({w.size(0) / out}) : torch::Tensor(),
                                                   one, zero);
  const torch::Tensor zs = z.unflatten(1, kernel_split);
  std::vector<int64_t> order{0}, merged{z.size(0)};
  if (!channels_last) order.push_back(1), merged.push_back(out);
  const int k_axis = channels_last ? 1 : 2;  // the first k axis of zs
  for (int d = 0; d < dims_; ++d) {
    order.insert(order.end(), {2 + dims_ + d, k_axis + d});
    merged.push_back(z.size(2 + d) * k);
  }
  if (!channels_last) {
    std::vector<int64_t> bshape(dims_ + 2, 1);
    bshape[1] = out;
    return zs.permute(order).reshape(merged) + bias.view(bshape);
  }
  order.push_back(1 + dims_);
  merged.push_back(out);
  std::vector<int64_t> to_logical{0, dims_ + 1};
  for (int d = 0; d < dims_; ++d) to_logical.push_back(1 + d);
  return zs.permute(order).contiguous().view(merged).permute(to_logical);
}

NormNdImpl::NormNdImpl(Norm kind, int64_t channels) : kind_(kind) {
  groups_ = kind == Norm::kInstance ? channels : std::gcd<int64_t>(8, channels);
  weight_ = register_parameter("weight", torch::ones({channels}));
  bias_ = register_parameter("bias", torch::zeros({channels}));
  if (kind == Norm::kBatch) {
    running_mean_ = register_buffer("running_mean", torch::zeros({channels}));
    running_var_ = register_buffer("running_var", torch::ones({channels}));
  }
}

namespace {

// sum_across_ranks as an autograd function.
struct ReplicaSumFunction : torch::autograd::Function<ReplicaSumFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const ReplicaSum* sum) {
    ctx->saved_data["sum"] = reinterpret_cast<int64_t>(sum);
    torch::Tensor y = x.detach().contiguous().clone();
    (*sum)(y);
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto* sum = reinterpret_cast<const ReplicaSum*>(ctx->saved_data["sum"].toInt());
    torch::Tensor g = grads[0].contiguous().clone();
    (*sum)(g);
    return {g, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor sum_across_ranks(const torch::Tensor& x, const ReplicaSum& sum) {
  return ReplicaSumFunction::apply(x, &sum);
}

torch::Tensor NormNdImpl::synchronised_forward(const torch::Tensor& x) {
  const int64_t c = x.size(1);
  std::vector<int64_t> reduce{0};
  for (int64_t d = 2; d < x.dim(); ++d) reduce.push_back(d);
  const auto local = torch::cat({x.sum(reduce), (x * x).sum(reduce)});
  const auto global = sum_across_ranks(local, sync_);
  torch::Tensor count = torch::full({1}, static_cast<float>(x.numel() / c));
  sync_(count);
  const double n = count.item<double>();
  const auto mean = global.narrow(0, 0, c) / n;
  const auto var = (global.narrow(0, c, c) / n - mean * mean).clamp_min(0);
  {
    torch::NoGradGuard no_grad;
    running_mean_.mul_(0.9).add_(mean.detach(), 0.1);
    running_var_.mul_(0.9).add_(var.detach() * (n / std::max(n - 1.0, 1.0)), 0.1);
  }
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = c;
  return (x - mean.view(shape)) * torch::rsqrt(var.view(shape) + 1e-5) * weight_.view(shape) + bias_.view(shape);
}

namespace {

// Normalisation of a decomposed image as one autograd function, so backward keeps what one
// process's group/batch norm keeps (the input, the mean and 1/σ per group) instead of every
// intermediate. Statistics over the whole image (group/instance norm: per sample and group;
// batch norm: per channel over the whole batch), two passes: the global mean, then the
// global sum of squared deviations from it (no cancellation as in E[x²] − E[x]²). Backward:
//   x̂ = (x − μ)/σ,  ĝ = g·w,  dx = (ĝ − Σĝ/n − x̂ Σ(ĝ x̂)/n)/σ   (sums global, as in forward),
//   dw = Σ g x̂, db = Σ g over this rank's block (the trainer sums weight gradients over ranks).
struct DecomposedNormFunction : torch::autograd::Function<DecomposedNormFunction> {
  // Batch norm: (1, C, N·block) reduced over dim 2; group norm: (N, G, C/G·block) likewise.
  static torch::Tensor grouped(const torch::Tensor& x, bool batch, int64_t groups) {
    return batch ? x.transpose(0, 1).reshape({1, x.size(1), -1}) : x.reshape({x.size(0), groups, -1});
  }
  static torch::Tensor ungrouped(const torch::Tensor& y, const torch::Tensor& like, bool batch) {
    return batch ? y.view({like.size(1), like.size(0), -1}).transpose(0, 1).reshape(like.sizes()) : y.view(like.sizes());
  }
  static torch::Tensor global_sum(const Decomposition& d, bool batch, const torch::Tensor& t) {
    return batch ? d.batch_sum(t) : d.image_sum(t);
  }
  static std::vector<int64_t> channel_shape(const torch::Tensor& x) {
    std::vector<int64_t> shape(x.dim(), 1);
    shape[1] = x.size(1);
    return shape;
  }

  // Returns y; `stats` receives (mean, var, n) for the running statistics.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, const Decomposition* d, bool batch, int64_t groups,
                               std::vector<torch::Tensor>* stats) {
    const torch::Tensor g = grouped(x, batch, groups);
    // The element count n rides in the same sum as the means' numerators (blocks, and batches,
    // may differ between ranks): no collective and no host synchronisation of its own.
    const torch::Tensor local_sums = g.sum(2, /*keepdim=*/true);
    const torch::Tensor sums = global_sum(
        *d, batch, torch::cat({local_sums.flatten(), torch::full({1}, static_cast<double>(g.size(2)), g.options())}));
    const torch::Tensor n = sums.narrow(0, local_sums.numel(), 1);
    const torch::Tensor mean = sums.narrow(0, 0, local_sums.numel()).view_as(local_sums) / n;
    const torch::Tensor var = global_sum(*d, batch, (g - mean).square_().sum(2, /*keepdim=*/true)) / n;
    const torch::Tensor rstd = torch::rsqrt(var + 1e-5);
    *stats = {mean, var, n};
    ctx->save_for_backward({x, weight, mean, rstd, n});
    ctx->saved_data["d"] = reinterpret_cast<int64_t>(d);
    ctx->saved_data["batch"] = batch;
    ctx->saved_data["groups"] = groups;
    const torch::Tensor xhat = ungrouped((g - mean).mul_(rstd), x, batch);
    // A new tensor, not a view of x̂ (the caller's in-place ReLU may modify it).
    return xhat.mul(weight.view(channel_shape(x))).add_(bias.view(channel_shape(x)));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1], &mean = saved[2], &rstd = saved[3], &n = saved[4];
    const auto* d = reinterpret_cast<const Decomposition*>(ctx->saved_data["d"].toInt());
    const bool batch = ctx->saved_data["batch"].toBool();
    const int64_t groups = ctx->saved_data["groups"].toInt();
    const torch::Tensor g = grads[0].contiguous();
    const torch::Tensor xhat_g = (grouped(x, batch, groups) - mean).mul_(rstd);
    const torch::Tensor xhat = ungrouped(xhat_g, x, batch);
    std::vector<int64_t> not_channel{0};
    for (int64_t a = 2; a < x.dim(); ++a) not_channel.push_back(a);
    const torch::Tensor dweight = (g * xhat).sum(not_channel);
    const torch::Tensor dbias = g.sum(not_channel);
    const torch::Tensor ghat = grouped(g * weight.view(channel_shape(x)), batch, groups);
    const torch::Tensor s1 = global_sum(*d, batch, ghat.sum(2, /*keepdim=*/true)) / n;
    const torch::Tensor s2 = global_sum(*d, batch, (ghat * xhat_g).sum(2, /*keepdim=*/true)) / n;
    const torch::Tensor dx = ungrouped((ghat - s1 - xhat_g * s2).mul_(rstd), x, batch);
    return {dx, dweight, dbias, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor NormNdImpl::decomposed_forward(const torch::Tensor& x, const Decomposition& d) {
  const bool batch = kind_ == Norm::kBatch;
  std::vector<torch::Tensor> stats;
  torch::Tensor y = DecomposedNormFunction::apply(x, weight_, bias_, &d, batch, groups_, &stats);
  if (batch) {
    torch::NoGradGuard no_grad;
    const int64_t c = x.size(1);
    const torch::Tensor& n = stats[2];
    running_mean_.mul_(0.9).add_(stats[0].view({c}), 0.1);
    running_var_.mul_(0.9).add_(stats[1].view({c}) * (n / (n - 1).clamp_min(1)), 0.1);
  }
  return y;
}

torch::Tensor NormNdImpl::forward(const torch::Tensor& x) {
  if (const Decomposition* d = active_decomposition(); d && (kind_ != Norm::kBatch || is_training()))
    return decomposed_forward(x, *d);
  if (kind_ == Norm::kBatch && sync_ && is_training()) return synchronised_forward(x);
  if (kind_ == Norm::kBatch)
    return torch::batch_norm(x, weight_, bias_, running_mean_, running_var_, is_training(), 0.1, 1e-5,
                             /*cudnn_enabled=*/true);
  return torch::group_norm(x, groups_, weight_, bias_, 1e-5);
}

int64_t conv_padding(Padding padding, int64_t kernel) { return padding == Padding::kSame ? (kernel - 1) / 2 : 0; }

void ConvBlockOptions::validate() const {
  if (dims < 1 || dims > 3) throw Error("conv block: dims must be 1, 2 or 3, got " + std::to_string(dims));
  if (in_channels < 1 || out_channels < 1)
    throw Error("conv block: in_channels and out_channels must be >= 1, got " + std::to_string(in_channels) + " and " +
                std::to_string(out_channels));
  if (convs < 1) throw Error("conv block: convs must be >= 1, got " + std::to_string(convs));
  if (kernel < 1 || kernel % 2 == 0) throw Error("conv block: kernel must be odd and >= 1, got " + std::to_string(kernel));
}

ConvBlockImpl::ConvBlockImpl(const ConvBlockOptions& o) {
  o.validate();
  const int64_t pad = conv_padding(o.padding, o.kernel);
  for (int i = 0; i < o.convs; ++i) {
    const int64_t in = i == 0 ? o.in_channels : o.out_channels;
    convs_.push_back(register_module("conv" + std::to_string(i), ConvNd(o.dims, in, o.out_channels, o.kernel, pad)));
    if (o.norm != Norm::kNone)
      norms_.push_back(register_module("norm" + std::to_string(i), NormNd(o.norm, o.out_channels)));
  }
}

torch::Tensor ConvBlockImpl::forward(torch::Tensor x) {
  for (size_t i = 0; i < convs_.size(); ++i) {
    x = convs_[i]->forward(x);
    if (!norms_.empty()) x = norms_[i]->forward(x);
    x = torch::relu_(x);
  }
  return x;
}

torch::Tensor max_pool2x(const torch::Tensor& x) {
  switch (x.dim()) {
    case 3: return torch::max_pool1d(x, 2);
    case 4: return torch::max_pool2d(x, 2);
    case 5: return torch::max_pool3d(x, 2);
  }
  TESSERA_CHECK(x.dim() >= 3 && x.dim() <= 5);
  return {};
}

torch::Tensor upsample_nearest2x(const torch::Tensor& x) {
  TESSERA_CHECK(x.dim() == 4 || x.dim() == 5);
  return x.dim() == 4 ? torch::upsample_nearest2d(x, {x.size(2) * 2, x.size(3) * 2})
                      : torch::upsample_nearest3d(x, {x.size(2) * 2, x.size(3) * 2, x.size(4) * 2});
}

}  // namespace tessera
