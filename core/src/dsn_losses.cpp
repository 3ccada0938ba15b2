#include "tessera/core/dsn_losses.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

std::string shape(const torch::Tensor& t) { return c10::str(t.sizes()); }

// (N, C, spatial...) → (N·positions, C) with each row scaled to unit length (zero rows stay zero).
torch::Tensor unit_rows(const torch::Tensor& code) {
  const auto rows = code.movedim(1, -1).reshape({-1, code.size(1)});
  return rows / rows.norm(2, {1}, /*keepdim=*/true).clamp_min(1e-6);
}

// ‖u − v‖² for every pair of rows, (n × m), by ‖u‖² + ‖v‖² − 2 u·v; the floor removes the
// rounding below 0 on (near-)coincident points.
torch::Tensor squared_distances(const torch::Tensor& a, const torch::Tensor& b) {
  const auto aa = a.square().sum(1, /*keepdim=*/true);
  const auto bb = b.square().sum(1, /*keepdim=*/true).t();
  return (aa + bb - 2.0 * a.matmul(b.t())).clamp_min(0.0);
}

torch::Tensor mean_kernel(const torch::Tensor& a, const torch::Tensor& b, const std::vector<double>& sigmas) {
  const auto d2 = squared_distances(a, b);
  auto k = torch::zeros_like(d2);
  for (double sigma : sigmas) k = k + torch::exp(d2 * (-1.0 / (2.0 * sigma * sigma)));
  return k.mean();
}

class GradientReversal : public torch::autograd::Function<GradientReversal> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, double lambda) {
    ctx->saved_data["lambda"] = lambda;
    return x.view_as(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const double lambda = ctx->saved_data["lambda"].toDouble();
    return {grad_outputs[0] * -lambda, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor simse_per_sample(const torch::Tensor& x, const torch::Tensor& reconstruction) {
  if (x.sizes() != reconstruction.sizes())
    throw Error("simse: input " + shape(x) + " and reconstruction " + shape(reconstruction) + " differ in shape");
  if (x.dim() < 1 || x.size(0) == 0 || x.numel() / x.size(0) == 0)
    throw Error("simse: need (N, ...) with N >= 1 and at least one element per sample, got " + shape(x));
  const int64_t n = x.size(0);
  const auto d = (x - reconstruction).reshape({n, x.numel() / n});
  // (1/k) Σ d² − (1/k²)(Σ d)² written as the variance of d: the same value without the
  // cancellation of two large terms when the error is mostly a constant offset.
  return (d - d.mean(1, /*keepdim=*/true)).square().mean(1);
}

torch::Tensor difference_statistics(const torch::Tensor& shared_code, const torch::Tensor& private_code) {
  const bool same_layout = shared_code.dim() >= 2 && shared_code.dim() == private_code.dim() &&
                           shared_code.size(0) == private_code.size(0) &&
                           shared_code.sizes().slice(2) == private_code.sizes().slice(2);
  if (!same_layout)
    throw Error("difference loss: codes must be (N, C, spatial...) with the same N and spatial size, got shared " +
                shape(shared_code) + " and private " + shape(private_code));
  const auto type = torch::promote_types(shared_code.scalar_type(), private_code.scalar_type());
  return unit_rows(shared_code.to(type)).t().matmul(unit_rows(private_code.to(type)));
}

torch::Tensor difference_loss(const torch::Tensor& g, double rows) {
  if (!(rows > 0)) throw Error("difference loss: the number of rows must be > 0, got " + std::to_string(rows));
  return (g / rows).square().sum();
}

torch::Tensor gradient_reversal(const torch::Tensor& x, double lambda) { return GradientReversal::apply(x, lambda); }

double dann_lambda(double progress) {
  const double p = std::clamp(progress, 0.0, 1.0);
  return 2.0 / (1.0 + std::exp(-10.0 * p)) - 1.0;
}

torch::Tensor mmd2(const torch::Tensor& a, const torch::Tensor& b, const std::vector<double>& sigmas) {
  if (a.dim() != 2 || b.dim() != 2 || a.size(1) != b.size(1))
    throw Error("mmd2: samples must be (n × F) and (m × F) with the same F, got " + shape(a) + " and " + shape(b));
  if (a.size(0) == 0 || b.size(0) == 0) throw Error("mmd2: empty sample, got " + shape(a) + " and " + shape(b));
  if (sigmas.empty()) throw Error("mmd2: no kernel bandwidth (sigmas is empty)");
  for (double s : sigmas)
    if (!(s > 0) || !std::isfinite(s)) throw Error("mmd2: kernel bandwidths must be finite and > 0, got " + std::to_string(s));
  const auto type = torch::promote_types(a.scalar_type(), b.scalar_type());
  const auto a64 = a.to(torch::kFloat64), b64 = b.to(torch::kFloat64);
  const auto value = mean_kernel(a64, a64, sigmas) + mean_kernel(b64, b64, sigmas) - 2.0 * mean_kernel(a64, b64, sigmas);
  return value.to(type);
}

}  // namespace tessera
