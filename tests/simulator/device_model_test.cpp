// The device model from measurements (conv_table.hpp, simulator.hpp's "per layer"): the
// measured convolution table read back at its own points, clamped outside them, split by
// algorithm family; the memory-bound layers counted by hand; activation checkpointing's
// recomputed forwards and the memory it saves.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/parallel/plan/cluster.hpp"
#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::parallel {
namespace {

const std::filesystem::path kClusters = std::filesystem::path(TESSERA_SOURCE_DIR) / "clusters";

// DeepBench V100, FP32 sheet, "Vision" row: W = H = 28, C 256, N 16, K 512, 3 × 3, pad 1,
// stride 1, forward 0.801 ms, backward-data 0.859 ms (WINOGRAD_NONFUSED) — the issue's
// 36.95 TFLOP/s example. Its direct FLOPs 2·16·512·256·9·28² over each time and 15.7 TFLOP/s.
TEST(ConvTable, ReadsAMeasuredShapeBackAtItsOwnPoint) {
  const ConvTable t = load_cluster(kClusters / "dgx1.yaml").device.convolutions;
  ASSERT_FALSE(t.empty());
  EXPECT_NE(t.source.find("baidu-research/DeepBench"), std::string::npos) << t.source;
  const double flops = 2.0 * 16 * 512 * 256 * 9 * 28 * 28;
  const ConvQuery q{16.0 * 28 * 28, 256, 512, 9, true};
  EXPECT_NEAR(t.efficiency(Precision::kFp32, ConvPass::kForward, q), flops / (0.801e-3 * 15.7e12), 1e-9);
  EXPECT_NEAR(t.efficiency(Precision::kFp32, ConvPass::kBackwardData, q), flops / (0.859e-3 * 15.7e12), 1e-9);
  EXPECT_GT(t.efficiency(Precision::kFp32, ConvPass::kForward, q), 2.0);  // Winograd: above peak's direct count
}

// Beyond the measured range each coordinate is clamped: a 1434² map at batch 1 (2.06 M
// positions) reads what the largest measured M (802816) reads.
TEST(ConvTable, ClampsOutsideTheMeasuredRange) {
  const ConvTable t = load_cluster(kClusters / "dgx1.yaml").device.convolutions;
  const ConvQuery big{1434.0 * 1434, 64, 64, 9, true}, edge{802816, 64, 64, 9, true};
  EXPECT_DOUBLE_EQ(t.efficiency(Precision::kFp32, ConvPass::kForward, big),
                   t.efficiency(Precision::kFp32, ConvPass::kForward, edge));
}

// Where a query lies against the points it reads (FP32 3 × 3: M 392 … 802816, C·R·S 9 …
// 4608, K 16 … 512): a 1434² map above M, a 7² map at batch 1 below it, the 28², 256 → 512
// point inside, Ronneberger's deepest layer (28², 1024 → 1024) above on C·R·S and K.
TEST(ConvTable, SaysWhichCoordinatesItClamped) {
  const ConvTable t = load_cluster(kClusters / "dgx1.yaml").device.convolutions;
  auto side = [&t](ConvQuery q) { return t.clamped(Precision::kFp32, ConvPass::kForward, q); };
  EXPECT_EQ(side({1434.0 * 1434, 64, 64, 9, true}), (std::array<int, 3>{1, 0, 0}));
  EXPECT_EQ(side({49, 512, 512, 9, true}), (std::array<int, 3>{-1, 0, 0}));
  EXPECT_EQ(side({16.0 * 28 * 28, 256, 512, 9, true}), (std::array<int, 3>{0, 0, 0}));
  EXPECT_EQ(side({28.0 * 28, 1024, 1024, 9, true}), (std::array<int, 3>{0, 1, 1}));
  EXPECT_EQ(side({392, 512, 512, 9, true}), (std::array<int, 3>{0, 0, 0}));  // the smallest point itself
}

// 3-D and 1 × 1 layers read only the kernels cuDNN ran as a GEMM (no Winograd): their
// efficiency stays below the best GEMM point (1 × 1, 7², C 1024 → K 256 … all under 0.8),
// where the same GEMM shape as a 2-D 3 × 3 reads Winograd points above 1.
TEST(ConvTable, NonWinogradLayersReadGemmKernelsOnly) {
  const ConvTable t = load_cluster(kClusters / "dgx1.yaml").device.convolutions;
  const ConvQuery three_d{32768, 256, 256, 27, false}, two_d{32768, 256, 256, 9, true};
  const double gemm = t.efficiency(Precision::kFp32, ConvPass::kForward, three_d);
  EXPECT_GT(gemm, 0.2);
  EXPECT_LT(gemm, 1.0);
  EXPECT_GT(t.efficiency(Precision::kFp32, ConvPass::kForward, two_d), 1.0);
  const ConvTable gp102 = load_cluster(kClusters / "p40-server.yaml").device.convolutions;
  EXPECT_THROW(gp102.efficiency(Precision::kFp16, ConvPass::kForward, two_d), Error);  // no FP16 sheet
}

// The table's own interpolation error: each measured shape read from the others (its
// repeats left out with it), per precision, pass and family, the mean |ln(read / measured)|
// — printed, the uncertainty a layer's time inherits (docs/parallel.md, held-out figures).
// A shape read back with itself left in is exact (the test above), so each error is > 0
// only when the leaving-out works.
TEST(ConvTable, LeaveOneOutErrorOfTheV100Table) {
  const ConvTable t = load_cluster(kClusters / "dgx1.yaml").device.convolutions;
  const ConvPass passes[] = {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kBackwardWeights};
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    const std::vector<ConvPoint>& all = p == Precision::kFp32 ? t.fp32 : t.fp16;
    for (ConvPass pass : passes)
      for (bool winograd : {true, false}) {
        double sum = 0;
        int n = 0;
        for (const ConvPoint& row : all) {
          const size_t k = static_cast<size_t>(pass);
          if (row.efficiency[k] <= 0 || !(winograd ? row.winograd_shape : row.gemm_algorithm)) continue;
          ConvTable others = t;
          std::vector<ConvPoint>& rest = p == Precision::kFp32 ? others.fp32 : others.fp16;
          std::erase_if(rest, [&row](const ConvPoint& c) { return c.log2_gemm == row.log2_gemm; });
          const ConvQuery q{std::exp2(row.log2_gemm[0]), std::exp2(row.log2_gemm[1]) / 9, std::exp2(row.log2_gemm[2]), 9,
                            winograd};
          sum += std::abs(std::log(others.efficiency(p, pass, q) / row.efficiency[k]));
          ++n;
        }
        ASSERT_GT(n, 1);
        std::printf("  %s pass %d %-8s %3d shapes: mean |ln(read / measured)| %.3f\n", to_string(p).c_str(),
                    static_cast<int>(pass), winograd ? "3x3" : "gemm", n, sum / n);
        EXPECT_GT(sum, 0);
      }
  }
}

TEST(ConvTable, BadRowIsNamedWithTheFile) {
  const auto path = std::filesystem::temp_directory_path() / "tessera_conv_table_bad.yaml";
  std::ofstream(path) << "source: {repository: r, path: p, commit: c}\nfp32_flops: 1e12\nfp32:\n  - [1, 2, 3]\n";
  try {
    load_conv_table(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'fp32' row 1"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

// The memory-bound layers of the seed's U-Net, counted by hand on a 64² tile: its first
// norm (Dropout2d + InstanceNorm, 64 channels at 64²) moves 5 × its output forward and 7 ×
// backward, the LeakyReLU after it 2 and 3, in float32 at 900 GB/s, plus α_launch per pass.
TEST(DeviceModel, MemoryBoundLayersMoveTheirBytesAtTheBandwidth) {
  const DeviceModel d = load_cluster(kClusters / "dgx1.yaml").device;
  UNetOptions o;
  o.name = "s0-test";
  o.in_channels = 3;
  o.classes = 1;
  o.levels = 3;
  o.convs_per_level = 2;
  o.base_filters = 64;
  const LayerSequence seq = seed_unet_layer_sequence(o, 64);
  ASSERT_EQ(seq.layers[1].kind, LayerKind::kNorm);
  ASSERT_EQ(seq.layers[2].kind, LayerKind::kActivation);
  const double out = 64.0 * 64 * 64 * 4;  // bytes of one 64-channel 64² float32 map
  const LayerPassSeconds t = layer_pass_seconds(seq, d, Precision::kFp32, 1);
  EXPECT_NEAR(t.forward[1], 5 * out / 900e9 + 10e-6, 1e-15);
  EXPECT_NEAR(t.backward[1], 7 * out / 900e9 + 20e-6, 1e-15);
  EXPECT_NEAR(t.forward[2], 2 * out / 900e9 + 10e-6, 1e-15);
  EXPECT_NEAR(t.backward[2], 3 * out / 900e9 + 20e-6, 1e-15);
  // a micro-batch of 4 costs 4 × the bytes but one launch
  const LayerPassSeconds four = layer_pass_seconds(seq, d, Precision::kFp32, 4);
  EXPECT_NEAR(four.forward[2], 4 * 2 * out / 900e9 + 10e-6, 1e-15);
}

// With the measured table a batch gets its own efficiency and one launch per layer: 4 tiles
// take less than 4 × one tile, and never less than one tile.
TEST(DeviceModel, MeasuredTableGivesBatchesTheirOwnEfficiency) {
  const DeviceModel d = load_cluster(kClusters / "dgx1.yaml").device;
  const LayerSequence seq = unet_layer_sequence(unet_preset("unet-tiny"), 132);
  const LayerPassSeconds one = layer_pass_seconds(seq, d, Precision::kFp32, 1);
  const LayerPassSeconds four = layer_pass_seconds(seq, d, Precision::kFp32, 4);
  double s1 = 0, s4 = 0;
  for (size_t i = 0; i < one.forward.size(); ++i) s1 += one.forward[i], s4 += four.forward[i];
  EXPECT_LT(s4, 4 * s1);
  EXPECT_GT(s4, s1);
}

// Checkpointing on one stage with M micro-batches: `always` reruns every micro-batch's
// forward before its backward (M forwards more), `except_last` all but the last (M − 1), and
// the memory falls to the received tensors of the micro-batches waiting.
TEST(Checkpoint, RecomputesForwardsAndSavesMemory) {
  const ClusterModel c = load_cluster(kClusters / "dgx1.yaml");
  const LayerSequence seq = unet_layer_sequence(unet_preset("unet-tiny"), 132);
  auto run = [&](ActivationCheckpoint ck) {
    return simulate(SimulationOptions(seq).with_micro_batches(4).with_checkpoint(ck), c);
  };
  const SimulationResult never = run(ActivationCheckpoint::kNever), always = run(ActivationCheckpoint::kAlways),
                         except_last = run(ActivationCheckpoint::kExceptLast);
  double f = 0;
  for (double t : layer_pass_seconds(seq, c.device, Precision::kFp32, 1).forward) f += t;
  EXPECT_NEAR(always.step_seconds - never.step_seconds, 4 * f, 1e-12);
  EXPECT_NEAR(except_last.step_seconds - never.step_seconds, 3 * f, 1e-12);
  EXPECT_LT(always.device_peak_bytes[0], except_last.device_peak_bytes[0]);
  EXPECT_LT(except_last.device_peak_bytes[0], never.device_peak_bytes[0]);
  // inference has nothing to recompute
  EXPECT_DOUBLE_EQ(simulate(SimulationOptions(seq).with_training(false).with_checkpoint(ActivationCheckpoint::kAlways), c)
                       .step_seconds,
                   simulate(SimulationOptions(seq).with_training(false), c).step_seconds);
}

}  // namespace
}  // namespace tessera::parallel
