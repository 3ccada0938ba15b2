#pragma once
// The losses of the Domain Separation Network (Bousmalis et al., NeurIPS 2016) beyond the task
// loss: reconstruction (scale-invariant MSE), difference (soft orthogonality of the shared and
// private codes) and similarity (a gradient reversal layer before the domain classifier, DANN;
// or the maximum mean discrepancy of the shared codes of two domains).
//
// Tensors are float, codes laid out (N, C, spatial...) (NCHW or NCDHW alike); images and
// reconstructions any shape (N, ...) with the same shape for both.
//
// Notation (x an input sample, x̂ its reconstruction, k its number of elements, d = x − x̂):
//   simse  = (1/k) Σ d² − (1/k²) (Σ d)²       the MSE less the squared mean error, i.e. the
//                                              variance of d: a constant offset costs nothing.
//   Rows of the difference loss: one per position (sample, voxel) of the codes. h_c, h_p the
//   shared and private channel vectors there, ĥ = h / max(‖h‖₂, 1e-6) (so an all-zero vector
//   stays zero), Ĥ_c (M × C_c) and Ĥ_p (M × C_p) the stacked rows, M the number of rows:
//   G      = Ĥ_cᵀ Ĥ_p = Σ_rows ĥ_c ĥ_pᵀ         (C_c × C_p), a SUM over rows
//   L_diff = ‖G / M‖²_F                        0 when every shared channel is orthogonal (over
//                                              the rows) to every private one.
//   GRL    forward y = x, backward ∂L/∂x = −λ ∂L/∂y;  DANN's λ(p) = 2 / (1 + e^(−10 p)) − 1.
//   k(u, v) = Σ_σ exp(−‖u − v‖² / (2σ²))        a sum of Gaussian kernels of bandwidths σ
//   MMD²   = mean_{i,j} k(a_i, a_j) + mean_{i,j} k(b_i, b_j) − 2 mean_{i,j} k(a_i, b_j)
//                                              (the biased estimator, >= 0 up to rounding).
//
// Split batches (data parallel, micro-batches): simse is per sample, so sum it and count the
// samples. G is a sum over rows, so the G of a batch is the sum of its parts' G (allreduce),
// and M the sum of their row counts; only then call difference_loss. MMD² is NOT a sum over
// samples (it pairs every sample with every other): the features of the whole batch must be in
// one place (allgather) before mmd2.
#include <vector>

#include <torch/types.h>

namespace tessera {

/// Scale-invariant MSE per sample (Eigen et al.; DSN's L_recon): for sample i with k elements,
/// simse_i = (1/k) Σ (x − x̂)² − (1/k²) (Σ (x − x̂))². Returns shape (N), differentiable in both.
/// Throws tessera::Error when shapes differ (or a sample has no element).
torch::Tensor simse_per_sample(const torch::Tensor& x, const torch::Tensor& reconstruction);

/// Sufficient statistic of the difference loss for codes (N, C, spatial...): each position's
/// channel vector is L2-normalised (v / max(‖v‖, 1e-6)), the rows of H_c (N·positions × C_c)
/// and H_p (N·positions × C_p); returns G = Ĥ_cᵀ Ĥ_p, shape (C_c, C_p), a SUM over rows
/// (so G of a batch split over replicas is the sum of the parts). Throws on N/spatial mismatch.
torch::Tensor difference_statistics(const torch::Tensor& shared_code, const torch::Tensor& private_code);
/// DSN's L_difference = ‖G / M‖²_F where M is the number of rows (positions) G summed over. 0-dim.
/// Throws tessera::Error when rows <= 0.
torch::Tensor difference_loss(const torch::Tensor& g, double rows);

/// Gradient reversal layer (Ganin & Lempitsky): identity forward; backward multiplies the
/// incoming gradient by −lambda. A torch::autograd::Function.
torch::Tensor gradient_reversal(const torch::Tensor& x, double lambda);
/// DANN's schedule: λ(p) = 2 / (1 + exp(−10 p)) − 1 for training progress p in [0, 1] (clamped).
double dann_lambda(double progress);

/// Squared maximum mean discrepancy between samples a (n × F) and b (m × F), the biased
/// estimator with a sum of Gaussian kernels k(u, v) = Σ_σ exp(−‖u − v‖² / (2σ²)):
/// mean_{i,j} k(a_i, a_j) + mean_{i,j} k(b_i, b_j) − 2 mean_{i,j} k(a_i, b_j). 0-dim,
/// differentiable in a and b. Throws when F differs or sigmas is empty / non-positive
/// (and when a or b is not 2-D or has no sample). Computed in double, returned in the
/// inputs' (promoted) dtype.
torch::Tensor mmd2(const torch::Tensor& a, const torch::Tensor& b, const std::vector<double>& sigmas);

}  // namespace tessera
