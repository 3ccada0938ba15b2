#include "augmentation.hpp"

#include <cmath>
#include <numbers>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera::detail {
namespace {

namespace F = torch::nn::functional;

// Rotation about the axes of a (x, y[, z]) grid: 2-D one angle, 3-D Rz · Ry · Rx.
torch::Tensor rotation_matrix(const std::vector<double>& angles, int dims) {
  auto m = torch::eye(dims, torch::kDouble);
  if (angles.empty()) return m;
  const auto plane = [&](double a, int i, int j) {
    auto r = torch::eye(dims, torch::kDouble);
    r[i][i] = std::cos(a);
    r[i][j] = -std::sin(a);
    r[j][i] = std::sin(a);
    r[j][j] = std::cos(a);
    return r;
  };
  if (dims == 2) return plane(angles[0], 0, 1);
  return plane(angles[0], 0, 1).mm(plane(angles[1], 0, 2)).mm(plane(angles[2], 1, 2));
}

// affine_grid's sampling grid for `sizes` (spatial), plus a displacement in voxels (or none).
torch::Tensor sampling_grid(const torch::Tensor& affine, at::IntArrayRef sizes, const torch::Tensor& displacement) {
  const int d = static_cast<int>(sizes.size());
  std::vector<int64_t> shape{1, 1};
  shape.insert(shape.end(), sizes.begin(), sizes.end());
  torch::Tensor grid = F::affine_grid(affine.unsqueeze(0), shape, /*align_corners=*/false);  // (1, spatial…, d)
  if (!displacement.defined()) return grid;
  // Voxels to normalised units per grid coordinate (x is the last tensor axis).
  std::vector<double> per_voxel;
  for (int i = 0; i < d; ++i) per_voxel.push_back(2.0 / double(sizes[d - 1 - i]));
  return grid + displacement.unsqueeze(0) * torch::tensor(per_voxel, grid.options());
}

// A smooth random displacement (spatial…, d) in voxels: white noise smoothed by a Gaussian of
// `sigma`, scaled to a standard deviation of `magnitude`.
torch::Tensor elastic_field(uint64_t seed, at::IntArrayRef sizes, double magnitude, double sigma) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int d = static_cast<int>(sizes.size());
  std::vector<int64_t> shape{d};
  shape.insert(shape.end(), sizes.begin(), sizes.end());
  torch::Tensor noise = gaussian_smooth(torch::randn(shape, gen, torch::kFloat), sigma);
  noise = noise / noise.std().clamp_min(1e-12) * magnitude;
  std::vector<int64_t> order;
  for (int a = 1; a <= d; ++a) order.push_back(a);
  order.push_back(0);
  return noise.permute(order).contiguous();
}

void spatial(const AugmentDraw& draw, const TrainOptions::Augmentation& a, int64_t ignore_index, torch::Tensor& image,
             torch::Tensor& labels) {
  const int d = static_cast<int>(labels.dim());
  torch::Tensor affine = torch::zeros({d, d + 1}, torch::kDouble);
  affine.narrow(1, 0, d).copy_(rotation_matrix(draw.angles, d) / draw.zoom);
  affine = affine.to(torch::kFloat);
  torch::Tensor in_field, out_field;
  if (draw.elastic_seed) {
    in_field = elastic_field(draw.elastic_seed, image.sizes().slice(1), a.elastic, a.elastic_sigma);
    out_field = in_field;  // the labels' inset: the centre of the image's field
    for (int ax = 0; ax < d; ++ax) {
      const int64_t halo = (image.size(ax + 1) - labels.size(ax)) / 2;
      out_field = out_field.narrow(ax, halo, labels.size(ax));
    }
  }
  const torch::Tensor image_grid = sampling_grid(affine, image.sizes().slice(1), in_field);
  image = F::grid_sample(image.unsqueeze(0), image_grid,
                         F::GridSampleFuncOptions().mode(torch::kBilinear).padding_mode(torch::kZeros).align_corners(false))
              .squeeze(0);
  // Labels (nearest: class ids stay class ids) with a mask of ones beside them: zero padding
  // marks the pixels that came from outside the tile, which teach nothing.
  const torch::Tensor pair = torch::stack({labels.to(torch::kFloat), torch::ones(labels.sizes(), torch::kFloat)}).unsqueeze(0);
  const torch::Tensor moved =
      F::grid_sample(pair, sampling_grid(affine, labels.sizes(), out_field),
                     F::GridSampleFuncOptions().mode(torch::kNearest).padding_mode(torch::kZeros).align_corners(false))
          .squeeze(0);
  labels = torch::where(moved[1] > 0.5, moved[0].round().to(torch::kInt64), torch::full_like(labels, ignore_index));
}

}  // namespace

torch::Tensor gaussian_smooth(const torch::Tensor& x, double sigma) {
  if (sigma <= 0) return x;
  const int d = static_cast<int>(x.dim()) - 1;
  const int64_t radius = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(3 * sigma)));
  torch::Tensor k = torch::arange(-radius, radius + 1, torch::kFloat);
  k = torch::exp(-k * k / float(2 * sigma * sigma));
  k = k / k.sum();
  torch::Tensor y = x.unsqueeze(1);  // (N, 1, spatial…)
  for (int a = 0; a < d; ++a) {
    std::vector<int64_t> shape(d + 2, 1), pad(d, 0);
    shape[a + 2] = 2 * radius + 1;
    pad[a] = radius;
    const torch::Tensor w = k.view(shape);
    y = d == 2 ? F::conv2d(y, w, F::Conv2dFuncOptions().padding(pad)) : F::conv3d(y, w, F::Conv3dFuncOptions().padding(pad));
  }
  return y.squeeze(1);
}

AugmentDraw draw_augmentation(const TrainOptions::Augmentation& a, int dims, std::mt19937_64& rng) {
  AugmentDraw d;
  const auto happens = [&] { return std::bernoulli_distribution(a.probability)(rng); };
  const auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  if (a.rotation > 0 && happens()) {
    const double r = a.rotation * std::numbers::pi / 180;
    for (int i = 0; i < (dims == 2 ? 1 : 3); ++i) d.angles.push_back(uniform(-r, r));
  }
  if (a.scaling > 0 && happens()) d.zoom = uniform(1 - a.scaling, 1 + a.scaling);
  if (a.elastic > 0 && happens()) d.elastic_seed = rng() | 1;
  if (a.blur > 0 && happens()) d.blur_sigma = uniform(a.blur / 2, a.blur);
  if (a.contrast > 0 && happens()) d.contrast = uniform(1 - a.contrast, 1 + a.contrast);
  if (a.gamma > 0 && happens()) d.gamma = uniform(1 - a.gamma, 1 + a.gamma);
  return d;
}

void apply_augmentation(const AugmentDraw& d, const TrainOptions::Augmentation& a, int64_t ignore_index,
                        torch::Tensor& image, torch::Tensor& labels) {
  if (d.spatial()) spatial(d, a, ignore_index, image, labels);
  if (d.blur_sigma > 0) image = gaussian_smooth(image, d.blur_sigma);
  if (d.contrast == 1 && d.gamma == 1) return;
  const int d_spatial = static_cast<int>(image.dim()) - 1;
  std::vector<int64_t> axes;
  for (int ax = 1; ax <= d_spatial; ++ax) axes.push_back(ax);
  const torch::Tensor lo = image.amin(axes, true), hi = image.amax(axes, true);
  if (d.contrast != 1) {
    const torch::Tensor mean = image.mean(axes, true);
    image = torch::max(torch::min((image - mean) * d.contrast + mean, hi), lo);
  }
  if (d.gamma != 1) {
    const torch::Tensor range = (hi - lo).clamp_min(1e-7);
    image = ((image - lo) / range).clamp(0, 1).pow(d.gamma) * range + lo;
  }
}

void validate_augmentation(const TrainOptions::Augmentation& a) {
  if (a.rotation < 0 || a.rotation > 180) throw Error("train.augment_rotation: must be in [0, 180] degrees");
  if (a.scaling < 0 || a.scaling >= 1) throw Error("train.augment_scaling: must be in [0, 1)");
  if (a.elastic < 0) throw Error("train.augment_elastic: must be >= 0 (voxels)");
  if (a.elastic_sigma <= 0) throw Error("train.augment_elastic_sigma: must be > 0 (voxels)");
  if (a.blur < 0) throw Error("train.augment_blur: must be >= 0 (voxels)");
  if (a.contrast < 0 || a.contrast >= 1) throw Error("train.augment_contrast: must be in [0, 1)");
  if (a.gamma < 0 || a.gamma >= 1) throw Error("train.augment_gamma: must be in [0, 1)");
  if (a.probability < 0 || a.probability > 1) throw Error("train.augment_probability: must be in [0, 1]");
}

}  // namespace tessera::detail
