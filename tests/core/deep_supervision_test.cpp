// Deep supervision (core/src/deep_supervision.hpp): the decoder's levels are the forward's own,
// the loss without it is the plain loss to the bit, with it the gradient changes by the
// weighted losses of the lower levels, and a run with it resumes from its checkpoint.
#include <gtest/gtest.h>

#include <filesystem>

#include <torch/torch.h>

#include "memory_image.hpp"
#include "../../core/src/deep_supervision.hpp"
#include "../../core/src/train_model.hpp"
#include "tessera/core/checkpoint.hpp"
#include "tessera/core/trainer.hpp"
#include "tessera/run/run_writer.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

UNetOptions model(int dims, int levels) {
  return UNetOptions()
      .with_dims(dims)
      .with_in_channels(1)
      .with_classes(3)
      .with_levels(levels)
      .with_base_filters(4)
      .with_padding(Padding::kSame)
      .with_norm(Norm::kInstance);
}

// A batch of 2 tiles of side 16 and labels 0…2 with some ignored voxels.
detail::Sample sample(int dims) {
  torch::manual_seed(5);
  std::vector<int64_t> image = {2, 1}, labels = {2};
  for (int d = 0; d < dims; ++d) {
    image.push_back(16);
    labels.push_back(16);
  }
  detail::Sample s{torch::randn(image), torch::randint(0, 3, labels, torch::kLong)};
  s.target.select(1, 0).fill_(-100);  // ignore_index: a slice the loss skips
  return s;
}

TrainOptions loss_options(bool deep) {
  TrainOptions o;
  o.loss.kind = LossKind::kDiceCrossEntropy;
  o.deep_supervision = deep;
  return o;
}

// The model's loss on `s` and the U-Net's gradient after its backward.
std::pair<double, std::vector<torch::Tensor>> loss_and_gradient(UNet& net, bool deep, detail::Sample s) {
  const std::unique_ptr<detail::TrainModel> m = detail::unet_train_model(net, deep);
  m->module().zero_grad();
  std::vector<detail::Sample> samples{std::move(s)};
  TrainHooks one;
  const detail::ModelLoss l = m->loss(samples, loss_options(deep), one, 1.0, 0.0);
  l.for_backward.backward();
  std::vector<torch::Tensor> g;
  for (auto& p : net->parameters()) g.push_back(p.grad().clone());
  return {l.value, g};
}

TEST(DeepSupervision, WeightsHalvePerLevelTheLowestZeroNormalised) {
  const std::vector<double> five = detail::deep_supervision_weights(5);
  ASSERT_EQ(five.size(), 4u);
  EXPECT_DOUBLE_EQ(five[0], 4.0 / 7);
  EXPECT_DOUBLE_EQ(five[1], 2.0 / 7);
  EXPECT_DOUBLE_EQ(five[2], 1.0 / 7);
  EXPECT_EQ(five[3], 0.0);
  EXPECT_EQ(detail::deep_supervision_weights(3), (std::vector<double>{1.0, 0.0}));
  EXPECT_EQ(detail::deep_supervision_weights(2), (std::vector<double>{1.0}));
  EXPECT_EQ(detail::DeepSupervisionHeads(model(3, 5))->levels(), (std::vector<int>{1, 2}));
  EXPECT_TRUE(detail::DeepSupervisionHeads(model(3, 3))->levels().empty());
}

TEST(DeepSupervision, DecoderLevelsComeFromTheForwardItself) {
  for (int dims : {2, 3}) {
    torch::manual_seed(1);
    UNet net(model(dims, 4));
    const torch::Tensor x = sample(dims).input;
    std::map<int, torch::Tensor> features;
    const torch::Tensor kept = detail::forward_keeping_decoder(net, x, {1, 2}, features);
    EXPECT_TRUE(torch::equal(kept, net->forward(x))) << dims << "-D";
    ASSERT_EQ(features.size(), 2u);
    EXPECT_EQ(features.at(1).size(1), 8);  // dec1: 2 × base filters, half the side
    EXPECT_EQ(features.at(1).size(2), 8);
    EXPECT_EQ(features.at(2).size(1), 16);
    EXPECT_EQ(features.at(2).size(dims + 1), 4);
  }
}

TEST(DeepSupervision, TargetAtLevelTakesTheVoxelNearestEachBlockCentre) {
  const torch::Tensor t = torch::arange(64, torch::kLong).reshape({1, 8, 8});
  const torch::Tensor half = detail::target_at_level(t, 1);
  ASSERT_EQ(half.sizes(), (std::vector<int64_t>{1, 4, 4}));
  EXPECT_EQ(half[0][0][0].item<int64_t>(), 9);    // (1, 1) of the first 2×2 block
  EXPECT_EQ(half[0][3][2].item<int64_t>(), 61);   // (7, 5)
  EXPECT_EQ(detail::target_at_level(t, 2)[0][1][1].item<int64_t>(), 6 * 8 + 6);
  EXPECT_TRUE(torch::equal(detail::target_at_level(t, 0), t));
}

TEST(DeepSupervision, OffIsThePlainLossExactly) {
  torch::manual_seed(2);
  UNet net(model(3, 4));
  const detail::Sample s = sample(3);
  const auto [value, grads] = loss_and_gradient(net, false, s);
  // The loss as the trainer computed it before deep supervision existed.
  net->zero_grad();
  TrainHooks one;
  const detail::ModelLoss plain = detail::global_batch_loss(net->forward(s.input), s.target, loss_options(false).loss, one);
  plain.for_backward.backward();
  EXPECT_EQ(value, plain.value);
  auto p = net->parameters();
  for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::equal(grads[i], p[i].grad())) << "parameter " << i;
}

TEST(DeepSupervision, OnAddsTheLowerLevelsWeightedLoss) {
  torch::manual_seed(2);
  UNet net(model(3, 4));
  const detail::Sample s = sample(3);
  const auto [off, off_grads] = loss_and_gradient(net, false, s);
  torch::manual_seed(3);  // the heads' initialisation
  const auto [on, on_grads] = loss_and_gradient(net, true, s);
  // 4 levels: weight 2/3 on the full resolution, 1/3 on level 1, 0 on level 2.
  torch::manual_seed(3);
  detail::DeepSupervisionHeads heads(net->options());
  std::map<int, torch::Tensor> f;
  net->zero_grad();
  const torch::Tensor logits = detail::forward_keeping_decoder(net, s.input, {1}, f);
  TrainHooks one;
  const LossOptions lo = loss_options(true).loss;
  const detail::ModelLoss full = detail::global_batch_loss(logits, s.target, lo, one);
  const detail::ModelLoss level1 = detail::global_batch_loss(heads->forward(1, f.at(1)), detail::target_at_level(s.target, 1), lo, one);
  EXPECT_NEAR(on, 2.0 / 3 * full.value + 1.0 / 3 * level1.value, 1e-6);
  EXPECT_EQ(full.value, off);
  // The U-Net's gradient is that of the weighted sum, the lower level's share included.
  (2.0 / 3 * full.for_backward + 1.0 / 3 * level1.for_backward).backward();
  auto params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::allclose(on_grads[i], params[i].grad(), 1e-4, 1e-7)) << "parameter " << i;
  EXPECT_NE(on, off);
  double changed = 0;
  for (size_t i = 0; i < on_grads.size(); ++i) changed += (on_grads[i] - off_grads[i]).abs().sum().item<double>();
  EXPECT_GT(changed, 1e-6) << "the lower level's loss must reach the U-Net's weights";
  // Three levels: the only lower level weighs 0, so the loss is the plain one.
  torch::manual_seed(2);
  UNet three(model(3, 3));
  const auto [plain3, g3] = loss_and_gradient(three, false, s);
  const auto [deep3, d3] = loss_and_gradient(three, true, s);
  EXPECT_EQ(plain3, deep3);
}

// One band, three classes the network can learn.
struct Scene {
  testing::MemoryImage image{Index{64, 64}, 1, [](int, const Index& at) { return std::sin(float(at[1]) / 5.f); }};
  testing::MemoryImage labels{Index{64, 64}, 1, [](int, const Index& at) {
                                return std::sin(float(at[1]) / 5.f) > 0.3f ? 1.f : (at[0] > 40 ? 2.f : 0.f);
                              }};
};

TEST(DeepSupervision, ARunResumesWithItsHeads) {
  Scene scene;
  const std::vector<TrainingPair> pairs{{&scene.image, &scene.labels, Box{{0, 0}, {64, 64}}}};
  const auto run = [&](const std::string& name, int64_t steps, const std::string& resume) {
    const fs::path dir = fs::temp_directory_path() / ("tessera-deep-supervision-" + name);
    if (resume.empty()) fs::remove_all(dir);
    TrainOptions o;
    o.tile = 16;
    o.batch = 2;
    o.steps = steps;
    o.checkpoint_every = 2;
    o.seed = 4;
    o.progress = false;
    o.deep_supervision = true;
    o.run_dir = dir.string();
    o.resume = resume;
    torch::manual_seed(resume.empty() ? 1 : 99);
    UNet net(model(2, 4));
    CheckpointMeta meta;
    meta.model = net->options();
    meta.norm = {{0.f}, {1.f}};
    meta.class_names = {"background", "a", "b"};
    RunWriter writer(o.run_dir);
    train(net, pairs, o, meta, nullptr, {}, &writer);
    return std::make_pair(net, (dir / "checkpoints" / "last.pt").string());
  };
  const auto [whole, whole_ck] = run("whole", 4, "");
  const auto [half, half_ck] = run("half", 2, "");
  const auto [resumed, resumed_ck] = run("half", 4, half_ck);
  auto a = whole->parameters(), b = resumed->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
  EXPECT_NO_THROW(load_checkpoint(whole_ck));  // inference reads the U-Net alone
}

}  // namespace
}  // namespace tessera
