#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tessera/core/error.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"

namespace tessera::parallel {
namespace {

// Every split of n layers into k consecutive non-empty stages, by enumerating the k − 1 cut
// positions: the independent reference for the DP.
double brute_force(int n, int k, const StageCost& cost, std::vector<int>* best_sizes = nullptr) {
  std::vector<int> cuts(k - 1);
  for (int i = 0; i < k - 1; ++i) cuts[i] = i + 1;  // cut before layer cuts[i]
  double best = 1e300;
  while (true) {
    double worst = 0;
    std::vector<int> sizes;
    for (int s = 0; s < k; ++s) {
      const int first = s == 0 ? 0 : cuts[s - 1], end = s == k - 1 ? n : cuts[s];
      worst = std::max(worst, cost(first, end - 1, k - s));
      sizes.push_back(end - first);
    }
    if (worst < best) {
      best = worst;
      if (best_sizes) *best_sizes = sizes;
    }
    int i = k - 2;  // next combination of cut positions in 1 … n − 1
    while (i >= 0 && cuts[i] == n - 1 - (k - 2 - i)) --i;
    if (i < 0) break;
    ++cuts[i];
    for (int j = i + 1; j < k - 1; ++j) cuts[j] = cuts[j - 1] + 1;
  }
  return best;
}

void expect_valid(const Partition& p, int n, int k) {
  ASSERT_EQ(p.stages(), k);
  int sum = 0;
  for (int s : p.sizes) {
    EXPECT_GE(s, 1);
    sum += s;
  }
  EXPECT_EQ(sum, n);
}

TEST(Balance, DynamicProgrammingEqualsBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.0, 10.0);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + int(rng() % 12);
    const int k = 1 + int(rng() % std::min(n, 5));
    std::vector<double> w(n), skip(n);
    for (auto& x : w) x = u(rng);
    for (auto& x : skip) x = u(rng) * (rng() % 3 == 0);
    // Additive per layer, a skip-like term for every layer whose partner (mirror index) lies
    // before the stage, and a per-stage term that depends on the position from the end.
    const StageCost cost = [&](int f, int l, int e) {
      double c = 0;
      for (int x = f; x <= l; ++x) {
        c += w[x] * std::min(e, 3);
        if (n - 1 - x < f) c += skip[x];
      }
      return c + w[f] * 0.5;
    };
    const Partition p = min_max_partition(n, k, cost);
    expect_valid(p, n, k);
    EXPECT_DOUBLE_EQ(p.max_cost, brute_force(n, k, cost)) << "n=" << n << " k=" << k;
    // The reported costs are those of the returned split.
    for (int s = 0; s < k; ++s)
      EXPECT_DOUBLE_EQ(p.stage_costs[s], cost(p.first(s), p.first(s) + p.sizes[s] - 1, k - s));
    EXPECT_DOUBLE_EQ(p.max_cost, *std::max_element(p.stage_costs.begin(), p.stage_costs.end()));
    // One DP for every K gives the same optima as one DP per K.
    const auto all = min_max_partitions(n, k, cost);
    for (int kk = 1; kk <= k; ++kk) EXPECT_DOUBLE_EQ(all[kk - 1].max_cost, min_max_partition(n, kk, cost).max_cost);
  }
}

TEST(Balance, TimeBalanceEqualsBruteForce) {
  std::mt19937 rng(11);
  std::exponential_distribution<double> e(1.0);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = 2 + int(rng() % 11), k = 1 + int(rng() % std::min(n, 5));
    std::vector<double> t(n);
    for (auto& x : t) x = e(rng);
    const Partition p = balance_by_time(t, k);
    expect_valid(p, n, k);
    const double bf = brute_force(n, k, [&](int f, int l, int) {
      double s = 0;
      for (int x = f; x <= l; ++x) s += t[x];
      return s;
    });
    EXPECT_NEAR(p.max_cost, bf, 1e-12 * bf);
  }
}

TEST(Balance, HandExample) {
  // {5, 1, 1, 1, 5, 1} into 3: best is {5} {1 1 1} {5 1} with max 6.
  const Partition p = balance_by_time({5, 1, 1, 1, 5, 1}, 3);
  EXPECT_EQ(p.sizes, (std::vector<int>{1, 3, 2}));
  EXPECT_DOUBLE_EQ(p.max_cost, 6);
}

TEST(Balance, OneLayerPerStageWhenKEqualsN) {
  const Partition p = balance_by_time({3, 1, 4, 1, 5}, 5);
  EXPECT_EQ(p.sizes, (std::vector<int>(5, 1)));
  EXPECT_DOUBLE_EQ(p.max_cost, 5);
  EXPECT_EQ(balance_naive(5, 5).sizes, (std::vector<int>(5, 1)));
}

TEST(Balance, TooManyStagesIsAnErrorNamingTheField) {
  for (int k : {0, 6}) {
    try {
      balance_by_time({1, 2, 3, 4, 5}, k);
      FAIL() << k;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("stages"), std::string::npos) << e.what();
    }
    EXPECT_THROW(balance_naive(5, k), Error);
  }
}

TEST(Balance, NaiveSplitsEvenly) {
  const Partition p = balance_naive(49, 4);
  EXPECT_EQ(p.sizes, (std::vector<int>{13, 12, 12, 12}));
}

// On the real network: the memory balance is the brute-force optimum of stage_bytes, never
// worse than the naive split, and never leaves a stage empty.
TEST(Balance, MemoryBalanceOfUNetIsTheExactOptimum) {
  for (const auto& name : {"unet-tiny", "unet-small", "unet3d-tiny"}) {
    const auto o = unet_preset(name);
    const auto seq = unet_layer_sequence(o, 4 * unet_alignment(o) + unet_remainder(o) + 2 * unet_halo(o));
    for (auto schedule : {PipelineScheduleKind::kGPipe, PipelineScheduleKind::kOneFOneB})
      for (int k : {2, 4})
        for (auto ckpt : {ActivationCheckpoint::kNever, ActivationCheckpoint::kAlways, ActivationCheckpoint::kExceptLast}) {
          const auto mo = StageMemoryOptions{}.with_micro_batches(4).with_schedule(schedule).with_checkpoint(ckpt);
          const StageCost cost = [&](int f, int l, int e) { return double(stage_bytes(seq, f, l, e, mo)); };
          const Partition p = balance(BalanceStrategy::kMemory, seq, k, mo);
          expect_valid(p, seq.size(), k);
          EXPECT_DOUBLE_EQ(p.max_cost, brute_force(seq.size(), k, cost)) << name << " K=" << k << " " << to_string(ckpt);
          const Partition naive = balance(BalanceStrategy::kNaive, seq, k, mo);
          EXPECT_LE(p.max_cost, naive.max_cost);
        }
  }
}

// L = 2 hand example (layer_sequence_test's TinyNetworkByHand), cut after the pool. Per layer
// (in + out elements) · 4 = 1936, 2304, 1440, 544, 512, 768, 1536, 1312, 576, 576 and saved
// bytes 0, 1152, 864, 0, 256, 0, 1024, 0, 288, 288.
TEST(Balance, StageBytesByHand) {
  const auto o = UNetOptions{}.with_levels(2).with_convs_per_level(1).with_base_filters(2).with_in_channels(1).with_classes(2);
  const auto seq = unet_layer_sequence(o, 14);
  const auto one = StageMemoryOptions{};
  // Whole network: 16·210 parameter bytes; the worst layer is the concatenation (6): input
  // 196·4 + saved by layers 0 … 6 (3296) + its input and output (1536).
  EXPECT_EQ(stage_bytes(seq, 0, 9, 1, one), 3360 + 784 + 3296 + 1536);
  const auto m4 = StageMemoryOptions{}.with_micro_batches(4);
  // Stage 0 = layers 0..2 is second from the end: 1F1B holds min(4, 2) = 2 micro-batches, one
  // whole (784 + 1152 + 864) and one at its worst layer, the ReLU (784 + 1152 + 2304).
  EXPECT_EQ(stage_bytes(seq, 0, 2, 2, m4), 320 + (784 + 1152 + 864) + (784 + 1152 + 2304));
  // Stage 1 = layers 3..9 receives the pool output (72·4) and the cropped skip (128·4): 800;
  // its worst layer is the concatenation: 800 + 1280 kept by layers 3 … 6 + 1536.
  EXPECT_EQ(stage_bytes(seq, 3, 9, 1, m4), 3040 + 800 + 1280 + 1536);
  // A stage of the first convolution alone keeps the output it sent (288 · 4, the ReLU that
  // would keep it is on the next stage) for each whole micro-batch; the current one forms it.
  EXPECT_EQ(stage_bytes(seq, 0, 0, 2, m4), 320 + (784 + 1152) + (784 + 1936));
  const auto gpipe = StageMemoryOptions{}.with_micro_batches(4).with_schedule(PipelineScheduleKind::kGPipe);
  EXPECT_EQ(stage_bytes(seq, 3, 9, 1, gpipe), 3040 + 3 * (800 + 1856) + (800 + 1280 + 1536));
  // Checkpointing: whole micro-batches keep what they received (800) only — all of them
  // (always), or all but the last, which stays whole (except_last).
  EXPECT_EQ(stage_bytes(seq, 3, 9, 1, StageMemoryOptions(gpipe).with_checkpoint(ActivationCheckpoint::kAlways)),
            3040 + 3 * 800 + (800 + 1280 + 1536));
  EXPECT_EQ(stage_bytes(seq, 3, 9, 1, StageMemoryOptions(gpipe).with_checkpoint(ActivationCheckpoint::kExceptLast)),
            3040 + (800 + 1856) + 2 * 800 + (800 + 1280 + 1536));
  EXPECT_EQ(parse_activation_checkpoint("except_last"), ActivationCheckpoint::kExceptLast);
  EXPECT_THROW(parse_activation_checkpoint("sometimes"), Error);
  // Inference: weights + the largest working set; at the concat (layer 6) stage 3..9 holds
  // the received skip: 128 + 256 + 128 = 512 elements.
  const auto infer = StageMemoryOptions{}.with_training(false);
  EXPECT_EQ(stage_bytes(seq, 3, 9, 1, infer), 4 * 190 + 4 * 512);
}

// A calibrated extra joins its layer's working set: the stage's peak is the worst layer's
// (received + kept so far + in + out + extra); parameters and whole micro-batches stay.
TEST(Balance, CalibratedExtrasJoinTheTransientWorkingSet) {
  const auto o = UNetOptions{}.with_levels(2).with_convs_per_level(1).with_base_filters(2).with_in_channels(1).with_classes(2);
  const auto seq = unet_layer_sequence(o, 14);
  const auto m4 = StageMemoryOptions{}.with_micro_batches(4);
  const int64_t plain = stage_bytes(seq, 3, 9, 1, m4);  // worst layer: the concat, 800 + 1280 + 1536
  std::vector<int64_t> extra(size_t(seq.size()), 0);
  extra[7] = 5000;  // dec0.conv0's workspace: now the worst layer, 800 + 1280 + 1312 + 5000
  EXPECT_EQ(stage_bytes(seq, 3, 9, 1, StageMemoryOptions(m4).with_extra_bytes(extra)) - plain,
            (800 + 1280 + 1312 + 5000) - (800 + 1280 + 1536));
  // An extra that leaves the layer below the worst one changes nothing; stages without it neither.
  extra[7] = 200;
  EXPECT_EQ(stage_bytes(seq, 3, 9, 1, StageMemoryOptions(m4).with_extra_bytes(extra)), plain);
  extra[7] = 5000;
  EXPECT_EQ(stage_bytes(seq, 0, 2, 2, StageMemoryOptions(m4).with_extra_bytes(extra)), stage_bytes(seq, 0, 2, 2, m4));
  // Inference ignores them (they are measured on forward + backward).
  const auto infer = StageMemoryOptions{}.with_training(false);
  EXPECT_EQ(stage_bytes(seq, 3, 9, 1, StageMemoryOptions(infer).with_extra_bytes(extra)), stage_bytes(seq, 3, 9, 1, infer));
  EXPECT_THROW(stage_bytes(seq, 3, 9, 1, StageMemoryOptions(m4).with_extra_bytes({1, 2})), Error);
}

// The memory balance stays the exact min-max partition with calibrated extras in the cost.
TEST(Balance, MemoryBalanceWithCalibrationIsTheExactOptimum) {
  std::mt19937 rng(7);
  for (const auto& name : {"unet-tiny", "unet3d-tiny"}) {
    const auto o = unet_preset(name);
    const auto seq = unet_layer_sequence(o, 3 * unet_alignment(o) + unet_remainder(o) + 2 * unet_halo(o));
    std::vector<int64_t> extra;
    for (const auto& l : seq.layers)
      extra.push_back(std::uniform_int_distribution<int64_t>(0, 3 * (l.in_elements + l.out_elements) * 4)(rng));
    for (int k : {2, 3, 4}) {
      const auto mo = StageMemoryOptions{}.with_micro_batches(4).with_extra_bytes(extra);
      const StageCost cost = [&](int f, int l, int e) { return double(stage_bytes(seq, f, l, e, mo)); };
      const Partition p = balance(BalanceStrategy::kMemory, seq, k, mo);
      expect_valid(p, seq.size(), k);
      EXPECT_DOUBLE_EQ(p.max_cost, brute_force(seq.size(), k, cost)) << name << " K=" << k;
    }
  }
}

// fit() recovers each layer's line from two sides, and extra_bytes() applies it at a third.
TEST(LayerMemoryCalibration, FitRecoversEachLayersLineAndAppliesItAtAnySide) {
  const auto o = unet_preset("unet-tiny");
  const int64_t a = unet_alignment(o), tail = unet_remainder(o) + 2 * unet_halo(o);
  const auto s1 = unet_layer_sequence(o, 4 * a + tail), s2 = unet_layer_sequence(o, 9 * a + tail);
  const auto s3 = unet_layer_sequence(o, 16 * a + tail);
  std::mt19937 rng(3);
  std::vector<double> c, r;
  std::vector<int64_t> e1, e2;
  for (int i = 0; i < s1.size(); ++i) {
    c.push_back(double(std::uniform_int_distribution<int>(0, 1 << 20)(rng)));
    r.push_back(double(std::uniform_int_distribution<int>(0, 12)(rng)));
    const auto x = [&](const LayerSequence& s) { return double(s.layers[i].in_elements + s.layers[i].out_elements); };
    e1.push_back(std::llround(c.back() + r.back() * x(s1)));
    e2.push_back(std::llround(c.back() + r.back() * x(s2)));
  }
  const auto fit = LayerMemoryCalibration::fit(s1, e1, s2, e2);
  ASSERT_EQ(fit.constant_bytes.size(), size_t(s1.size()));
  const auto e3 = fit.extra_bytes(s3);
  for (int i = 0; i < s3.size(); ++i) {
    EXPECT_NEAR(fit.bytes_per_element[i], r[i], 1e-9) << s1.layers[i].name;
    EXPECT_NEAR(double(e3[i]), c[i] + r[i] * double(s3.layers[i].in_elements + s3.layers[i].out_elements), 1.0)
        << s1.layers[i].name;
  }
  // Negative extrapolations are clamped at zero.
  auto negative = fit;
  negative.constant_bytes.assign(negative.constant_bytes.size(), -1e12);
  for (int64_t v : negative.extra_bytes(s3)) EXPECT_EQ(v, 0);
  // Another model's calibration is refused, naming it.
  try {
    fit.extra_bytes(unet_layer_sequence(unet_preset("unet-small"), 188));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("calibration"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LayerMemoryCalibration::fit(s1, e1, s1, e2), Error);  // same side twice: no line
}

}  // namespace
}  // namespace tessera::parallel
