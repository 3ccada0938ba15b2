// The trainer's spatial and intensity augmentations (core/src/augmentation.hpp): labels move
// with the image and stay class ids, zero strength is the identity, the draws follow the seed.
#include <gtest/gtest.h>

#include <set>

#include <torch/torch.h>

#include "memory_image.hpp"
#include "../../core/src/augmentation.hpp"
#include "../../core/src/tile_sampler.hpp"

namespace tessera {
namespace {

using testing::MemoryImage;

// Blocks of `block` voxels with class ids 0, 1 or 3 (2 never occurs): an image and its labels
// that agree wherever interpolation does not straddle a block edge.
torch::Tensor blocky_labels(std::vector<int64_t> sizes, int64_t block, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<int64_t> coarse;
  for (int64_t s : sizes) coarse.push_back(s / block);
  torch::Tensor c = torch::randint(0, 3, coarse, torch::kInt64);
  c = torch::where(c == 2, torch::full_like(c, 3), c);
  for (int a = 0; a < static_cast<int>(sizes.size()); ++a) c = c.repeat_interleave(block, a);
  return c;
}

// The share of labelled output voxels whose rounded image value equals the label; the image's
// inset of the labels' size is compared (a `valid` network's halo around it).
double agreement(const torch::Tensor& image, const torch::Tensor& labels, int64_t ignore) {
  torch::Tensor inset = image.select(0, 0);
  for (int a = 0; a < labels.dim(); ++a) inset = inset.narrow(a, (inset.size(a) - labels.size(a)) / 2, labels.size(a));
  const torch::Tensor labelled = labels != ignore;
  const torch::Tensor same = (inset.round().to(torch::kInt64) == labels).logical_and(labelled);
  return same.sum().item<double>() / std::max<double>(1, labelled.sum().item<double>());
}

TrainOptions::Augmentation spatial_on() {
  TrainOptions::Augmentation a;
  a.rotation = 40;
  a.scaling = 0.25;
  a.elastic = 1.5;
  a.elastic_sigma = 4;
  return a;
}

void check_moves_together(std::vector<int64_t> image_sizes, std::vector<int64_t> label_sizes) {
  const int64_t ignore = -100;
  const int d = static_cast<int>(label_sizes.size());
  const TrainOptions::Augmentation a = spatial_on();
  std::mt19937_64 rng(11);
  for (int k = 0; k < 3; ++k) {
    const torch::Tensor whole = blocky_labels(image_sizes, 8, 20 + k);
    torch::Tensor image = whole.to(torch::kFloat).unsqueeze(0);
    torch::Tensor labels = whole;
    for (int ax = 0; ax < d; ++ax) labels = labels.narrow(ax, (image_sizes[ax] - label_sizes[ax]) / 2, label_sizes[ax]);
    labels = labels.contiguous();
    const detail::AugmentDraw draw = detail::draw_augmentation(a, d, rng);
    ASSERT_TRUE(draw.spatial());
    const torch::Tensor before = image.clone();
    detail::apply_augmentation(draw, a, ignore, image, labels);
    EXPECT_FALSE(torch::allclose(image, before)) << "the draw did not move the image";
    // Interpolation differs from nearest only next to block edges.
    EXPECT_GT(agreement(image, labels, ignore), 0.85) << "labels did not move with the image (tile " << k << ")";
    std::set<int64_t> values;
    const torch::Tensor flat = labels.flatten();
    for (int64_t i = 0; i < flat.numel(); ++i) values.insert(flat[i].item<int64_t>());
    for (int64_t v : values) EXPECT_TRUE(v == 0 || v == 1 || v == 3 || v == ignore) << "label value " << v << " made up";
  }
}

TEST(Augmentation, LabelsMoveWithTheImageAndStayClassIds2D) { check_moves_together({48, 48}, {48, 48}); }

TEST(Augmentation, LabelsMoveWithTheImageAndStayClassIds3DWithHalo) { check_moves_together({32, 32, 32}, {16, 16, 16}); }

TEST(Augmentation, ZeroStrengthIsTheIdentity) {
  for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{24, 24}, std::vector<int64_t>{16, 16, 16}}) {
    TrainOptions::Augmentation a;  // elastic 0: a zero field even with a seed
    detail::AugmentDraw draw;
    draw.angles.assign(sizes.size() == 2 ? 1 : 3, 0.0);
    draw.zoom = 1;
    draw.elastic_seed = 7;
    torch::manual_seed(3);
    std::vector<int64_t> shape{2};
    shape.insert(shape.end(), sizes.begin(), sizes.end());
    torch::Tensor image = torch::randn(shape);
    torch::Tensor labels = blocky_labels(sizes, 4, 5);
    const torch::Tensor image0 = image.clone(), labels0 = labels.clone();
    detail::apply_augmentation(draw, a, -100, image, labels);
    EXPECT_TRUE(torch::allclose(image, image0, 1e-5, 1e-5)) << "max |diff| " << (image - image0).abs().max().item<float>();
    EXPECT_TRUE(torch::equal(labels, labels0));
  }
}

TEST(Augmentation, IntensityKeepsRangeAndLabels) {
  TrainOptions::Augmentation a;
  std::vector<detail::AugmentDraw> draws(3);
  draws[0].contrast = 1.3;
  draws[1].gamma = 0.7;
  draws[2].blur_sigma = 1;
  draws[2].contrast = 0.8;
  draws[2].gamma = 1.2;
  for (const detail::AugmentDraw& draw : draws) {
    torch::manual_seed(4);
    torch::Tensor image = torch::randn({1, 20, 20, 20});
    torch::Tensor labels = blocky_labels({20, 20, 20}, 4, 6);
    const torch::Tensor image0 = image.clone(), labels0 = labels.clone();
    detail::apply_augmentation(draw, a, -100, image, labels);
    EXPECT_TRUE(torch::equal(labels, labels0));
    EXPECT_GE(image.min().item<float>(), image0.min().item<float>() - 1e-5f);
    EXPECT_LE(image.max().item<float>(), image0.max().item<float>() + 1e-5f);
    EXPECT_FALSE(torch::allclose(image, image0));
  }
  // Blur alone lowers the variance of white noise.
  torch::Tensor noise = torch::randn({1, 32, 32});
  EXPECT_LT(detail::gaussian_smooth(noise, 1.0).std().item<float>(), 0.6f * noise.std().item<float>());
}

TEST(Augmentation, SamplerDrawsFollowTheSeed) {
  MemoryImage image{Index{40, 40}, 1, [](int, const Index& at) { return float((at[0] / 8 + at[1] / 8) % 3); }};
  MemoryImage labels{Index{40, 40}, 1, [](int, const Index& at) { return float((at[0] / 8 + at[1] / 8) % 3); }};
  const std::vector<TrainingPair> pairs{{&image, &labels, Box{{0, 0}, {40, 40}}}};
  const UNetOptions model = unet_preset("unet-tiny").with_in_channels(1).with_classes(3).with_padding(Padding::kSame);
  TrainOptions o;
  o.batch = 4;
  o.seed = 9;
  o.augmentation = spatial_on();
  o.augmentation.blur = 1;
  o.augmentation.contrast = 0.3;
  o.augmentation.gamma = 0.3;
  detail::TileSampler a(pairs, model, o, {{0.f}, {1.f}}, 0, 1), b(pairs, model, o, {{0.f}, {1.f}}, 0, 1);
  o.seed = 10;
  detail::TileSampler other(pairs, model, o, {{0.f}, {1.f}}, 0, 1);
  const detail::Sample x = a.load(a.plan(16)), y = b.load(b.plan(16)), z = other.load(other.plan(16));
  EXPECT_TRUE(torch::equal(x.input, y.input));
  EXPECT_TRUE(torch::equal(x.target, y.target));
  EXPECT_FALSE(torch::equal(x.input, z.input)) << "another seed drew the same tiles";
  const torch::Tensor valid = (x.target >= 0).logical_and(x.target < 3).logical_or(x.target == o.loss.ignore_index);
  EXPECT_TRUE(valid.all().item<bool>());
}

}  // namespace
}  // namespace tessera
