// The DSN's parts: the U-Net split at its code gives the U-Net's forward, each part has the
// parameters dsn_spec.hpp counts, a private encoder is the same whichever domains a process
// builds, what a DSN refuses, and a DSN checkpoint round trip (the U-Net alone for inference).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "memory_image.hpp"
#include "tessera/core/dsn_training.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/run/run_writer.hpp"

namespace tessera {
namespace {

UNetOptions small(int dims = 2) {
  return unet_preset("unet-tiny")
      .with_dims(dims)
      .with_in_channels(2)
      .with_classes(3)
      .with_base_filters(4)
      .with_levels(3)
      .with_padding(Padding::kSame)
      .with_norm(Norm::kGroup);
}

int64_t count(const std::vector<torch::Tensor>& ps) {
  int64_t n = 0;
  for (const auto& p : ps) n += p.numel();
  return n;
}

TEST(Dsn, EncodeThenDecodeIsTheUNetForward) {
  for (int dims : {2, 3}) {
    torch::manual_seed(1);
    UNet net(small(dims));
    const torch::Tensor x = torch::randn(dims == 2 ? std::vector<int64_t>{2, 2, 32, 32} : std::vector<int64_t>{1, 2, 16, 16, 16});
    std::map<int, torch::Tensor> skips;
    const torch::Tensor code = net->encode(x, skips);
    EXPECT_EQ(code.size(1), dsn_code_channels(net->options()));
    EXPECT_EQ(code.size(2), x.size(2) / 4);  // L = 3: two poolings
    EXPECT_TRUE(torch::allclose(net->decode(code, skips), net->forward(x), 1e-6, 1e-6)) << dims << "-D";
  }
}

TEST(Dsn, PartsHaveTheParametersTheSpecCounts) {
  DsnOptions o;
  o.domains = 3;
  o.private_filters = 3;
  o.recon_filters = 5;
  o.classifier_hidden = 7;
  for (int dims : {2, 3}) {
    Dsn dsn(small(dims), o, std::vector<int>{0, 1, 2}, uint64_t{1});
    EXPECT_EQ(count(dsn->parts->private_parameters(1)), dsn_private_parameter_count(small(dims), o));
    EXPECT_EQ(count(dsn->parts->recon->parameters()), dsn_recon_parameter_count(small(dims), o));
    EXPECT_EQ(count(dsn->parts->classifier->parameters()), dsn_classifier_parameter_count(small(dims), o));
    EXPECT_EQ(count(dsn->unet->parameters()), unet_parameter_count(small(dims)));
    const torch::Tensor x = torch::randn(dims == 2 ? std::vector<int64_t>{2, 2, 32, 32} : std::vector<int64_t>{1, 2, 16, 16, 16});
    const DsnOutputs out = dsn->forward(x, 2, true);
    EXPECT_EQ(out.reconstruction.sizes(), x.sizes());
    EXPECT_EQ(out.shared_code.sizes(), out.private_code.sizes());
    EXPECT_EQ(out.pooled.sizes(), (std::vector<int64_t>{x.size(0), dsn_pooled_channels(small(dims))}));  // 4 + 8 + 16
    ASSERT_EQ(out.levels.size(), 3u);
    for (int l = 0; l < 3; ++l) EXPECT_EQ(out.levels[size_t(l)].size(2), x.size(2) >> l) << "level " << l;
    EXPECT_EQ(out.logits.size(1), 3);
  }
}

TEST(Dsn, APrivateEncoderIsTheSameWhicheverDomainsAreBuilt) {
  DsnOptions o;
  o.domains = 4;
  torch::manual_seed(99);
  Dsn all(small(), o, std::vector<int>{0, 1, 2, 3}, uint64_t{5});
  torch::manual_seed(12345);  // the global stream does not matter
  Dsn some(small(), o, std::vector<int>{2, 3}, uint64_t{5});
  const auto a = all->parts->private_parameters(3), b = some->parts->private_parameters(3);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i]));
  EXPECT_TRUE(torch::equal(all->unet->parameters()[0], some->unet->parameters()[0]));
  // Different domains get different encoders.
  EXPECT_FALSE(torch::equal(all->parts->private_parameters(1)[0], all->parts->private_parameters(2)[0]));
}

TEST(Dsn, RefusesWhatItCannotTrain) {
  DsnOptions o;
  EXPECT_THROW(o.validate(small().with_padding(Padding::kValid)), Error);
  EXPECT_THROW(o.validate(small().with_norm(Norm::kBatch)), Error);
  o.domains = 1;
  EXPECT_THROW(o.validate(small()), Error);
  o.domains = 2;
  o.alpha = -1;
  EXPECT_THROW(o.validate(small()), Error);
  o.alpha = 0.1;
  o.similarity = Similarity::kMmd;
  o.mmd_sigmas = {};
  EXPECT_THROW(o.validate(small()), Error);
  o.mmd_sigmas = {1};
  EXPECT_NO_THROW(o.validate(small()));
}

TEST(Dsn, CheckpointRoundTripKeepsEveryPart) {
  DsnOptions o;
  o.domains = 3;
  o.similarity = Similarity::kMmd;
  o.mmd_sigmas = {0.5, 3};
  Dsn dsn(small(), o, std::vector<int>{0, 1, 2}, uint64_t{4});
  CheckpointMeta meta;
  meta.model = small();
  meta.norm = {{0.f, 0.f}, {1.f, 1.f}};
  meta.class_names = {"a", "b", "c"};
  meta.extra_model = dsn_extra_model(o);
  const std::string bytes = checkpoint_bytes(dsn->unet, meta, nullptr, dsn->parts.get());
  const std::string path = (std::filesystem::temp_directory_path() / ("tessera-dsn-" + std::to_string(::getpid()) + ".pt")).string();
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  LoadedDsn back = load_dsn_checkpoint(path);
  EXPECT_EQ(back.dsn->options(), o);
  const auto a = dsn->named_parameters(), b = back.dsn->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& p : a) EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << p.key();
  const LoadedCheckpoint unet = load_checkpoint(path);  // inference: the U-Net alone
  EXPECT_TRUE(torch::equal(unet.net->parameters()[0], dsn->unet->parameters()[0]));
  // A plain U-Net checkpoint is not a DSN's.
  const std::string plain = checkpoint_bytes(dsn->unet, CheckpointMeta{.model = meta.model, .norm = meta.norm, .class_names = meta.class_names});
  std::ofstream(path, std::ios::binary).write(plain.data(), std::streamsize(plain.size()));
  EXPECT_THROW(load_dsn_checkpoint(path), Error);
  std::filesystem::remove(path);
}

// The trainer's reports through the real writer and reader: every step's line carries the four
// terms, and the loss is their weighted sum with the configured α, β, γ; the checkpoint the
// writer keeps loads as a DSN.
TEST(Dsn, MetricsCarryTheWeightedTermsAndTheCheckpointLoads) {
  using tessera::testing::MemoryImage;
  const MemoryImage source({64, 64}, 2, [](int c, const Index& at) { return std::sin(0.2f * float(at[0] + c)) + 0.01f * float(at[1]); });
  const MemoryImage target({48, 48}, 2, [](int c, const Index& at) { return 2.0f * std::cos(0.2f * float(at[1] + c)) + 1.0f; });
  const MemoryImage labels({64, 64}, 1, [](int, const Index& at) { return float((at[0] / 8 + at[1] / 16) % 3); });
  const std::vector<std::vector<TrainingPair>> domains{{{&source, &labels, Box{{0, 0}, {64, 64}}}},
                                                       {{&target, nullptr, Box{{0, 0}, {48, 48}}}}};
  DsnOptions o;
  o.alpha = 0.3;
  o.beta = 0.7;
  o.gamma = 1.3;
  Dsn dsn(small(), o, std::vector<int>{0, 1}, uint64_t{2});
  TrainOptions t;
  t.tile = 16;
  t.batch = 2;
  t.steps = 3;
  t.progress = false;
  t.checkpoint_every = 2;
  t.run_dir = (std::filesystem::temp_directory_path() / ("tessera-dsn-run-" + std::to_string(::getpid()))).string();
  CheckpointMeta meta{.model = small(), .norm = {{0.f, 0.f}, {1.f, 1.f}}, .class_names = {"a", "b", "c"}};
  RunWriter writer(t.run_dir);
  train(dsn, domains, t, meta, nullptr, {}, &writer);
  const MetricsLog log = read_metrics(RunLayout(t.run_dir).metrics());
  ASSERT_EQ(log.steps.size(), 3u);
  for (const StepMetrics& m : log.steps) {
    std::map<std::string, double> term(m.loss_terms.begin(), m.loss_terms.end());
    ASSERT_EQ(term.size(), 4u);
    ASSERT_TRUE(m.loss.has_value());
    EXPECT_NEAR(*m.loss, term["task"] + 0.3 * term["reconstruction"] + 0.7 * term["difference"] + 1.3 * term["similarity"], 1e-9);
    EXPECT_GT(term["reconstruction"], 0);
    EXPECT_GT(term["similarity"], 0);  // cross-entropy of 2 domains, near log 2 at the start
    EXPECT_EQ(m.global_batch, 4);      // 2 tiles x 2 domains
  }
  LoadedDsn back = load_dsn_checkpoint(RunLayout(t.run_dir).last_checkpoint());
  EXPECT_EQ(back.meta.step, 3);
  EXPECT_TRUE(torch::equal(back.dsn->parts->private_parameters(1)[0], dsn->parts->private_parameters(1)[0]));
  std::filesystem::remove_all(t.run_dir);
}

}  // namespace
}  // namespace tessera
