#pragma once
// Published 3-D U-Nets as layer sequences, each from its own code, for the simulator's
// comparisons with their papers' and READMEs' figures (cubic inputs of side `side`; memory
// attribution as core/layer_sequence.hpp's):
//   - lamp_unet_pipe: LAMP's UNetPipe (Project-MONAI/research-contributions,
//     lamp-automated-model-parallelism/unet_pipe.py, commit 21ed8e57c725; train.py: n_feat 32,
//     depth 4, 1 input channel, N_CLASSES 10) — not the seed's unet3d-32: an initial 3³
//     convolution of stride 2 (1 → 32, half resolution) + BatchNorm + LeakyReLU; 4 DoubleConv
//     (3³ stride 2, BN, LeakyReLU, 3³, BN, LeakyReLU) of 64 … 512 filters at 1/4 … 1/32
//     resolution; per decoder level a transposed 2³ convolution of stride 2 (F_i → F_{i−1}), the
//     concatenation with the encoder's F_{i−1}, a 1³ convolution (2 F_{i−1} → F_i) and a
//     DoubleConv (F_i → F_{i−1}, its second convolution without norm and activation); a last
//     transposed convolution to full resolution (32 → 16), LeakyReLU, a 3³ convolution 16 → 10.
//   - dle_nnunet_3d: DeepLearningExamples' nnU-Net for Task01 at 128³ (PyTorch/Segmentation/
//     nnUNet, commit 729963dd47e7: MONAI DynUNet, depth 5, strides 1, 2, 2, 2, 2, 2, filters
//     32, 64, 128, 256, 320, 320, 4 modalities in, 4 classes out, no deep supervision): per
//     level conv (the first of stride 2 below level 0) + InstanceNorm + LeakyReLU twice; per
//     decoder level a transposed 2³ convolution of stride 2, the concatenation, two conv + norm
//     + LeakyReLU (2 F → F, F → F); a 1³ head.
#include <cmath>
#include <string>

#include "tessera/core/layer_sequence.hpp"

namespace tessera::test {

class Layers3d {
 public:
  Layers3d(int64_t side, std::string name, int in_channels, int classes) : side_(side) {
    seq_.options.name = std::move(name);
    seq_.options.dims = 3;
    seq_.options.in_channels = in_channels;
    seq_.options.classes = classes;
    seq_.input_side = seq_.output_side = side;
  }

  // A K³ convolution from level `in_level` to `level` (one level down: stride 2).
  void conv(const std::string& name, int level, int in_level, int64_t in, int64_t out, int kernel) {
    const double taps = std::pow(kernel, 3);
    add(name == "head" ? LayerKind::kHead : LayerKind::kConv, name, level, in_level, in, out, 2 * taps * in * out)
        .params = static_cast<int64_t>(taps) * in * out;
  }
  // Norm + LeakyReLU on the last layer's output.
  void norm_act(const std::string& name) {
    const Layer& last = seq_.layers.back();
    const int64_t c = last.out_channels;
    const int level = last.level;
    add(LayerKind::kNorm, name + ".norm", level, level, c, c, 0);
    add(LayerKind::kActivation, name + ".lrelu", level, level, c, c, 0);
  }
  void activation(const std::string& name) {
    const Layer& last = seq_.layers.back();
    add(LayerKind::kActivation, name, last.level, last.level, last.out_channels, last.out_channels, 0);
  }
  // Transposed 2³ convolution of stride 2 from level + 1 to level.
  void up(const std::string& name, int level, int64_t in, int64_t out) {
    add(LayerKind::kUp, name, level, level + 1, in, out, 2.0 * in * out).params = 8 * in * out;
  }
  // Concatenation at `level` of the last output (c channels) with `skip_layer`'s (c channels).
  void concat(const std::string& name, int level, int skip_layer) {
    const int64_t c = seq_.layers.back().out_channels;
    const int64_t skip = seq_.layers[static_cast<size_t>(skip_layer)].out_elements;
    add(LayerKind::kConcat, name, level, level, c, 2 * c, 0);
    seq_.skips.push_back({skip_layer, seq_.size() - 1, skip, skip});
  }
  int last() const { return seq_.size() - 1; }
  LayerSequence sequence() const { return seq_; }

 private:
  int64_t positions(int level) const { return (side_ >> level) * (side_ >> level) * (side_ >> level); }

  Layer& add(LayerKind kind, const std::string& name, int level, int in_level, int64_t in, int64_t out,
             double flops_per_output) {
    const int64_t out_elements = out * positions(level);
    seq_.layers.push_back(Layer{.kind = kind,
                                .name = name,
                                .level = level,
                                .in_channels = in,
                                .out_channels = out,
                                .in_side = side_ >> in_level,
                                .out_side = side_ >> level,
                                .flops = flops_per_output * static_cast<double>(positions(level)),
                                .in_elements = in * positions(in_level),
                                .out_elements = out_elements,
                                .saved_bytes = kind == LayerKind::kConcat ? 0 : out_elements * 4});
    return seq_.layers.back();
  }

  int64_t side_;
  LayerSequence seq_;
};

inline LayerSequence lamp_unet_pipe(int64_t side) {
  const int64_t F[] = {32, 64, 128, 256, 512};
  Layers3d n(side, "lamp-unet-pipe", 1, 10);
  int skip[4] = {};
  n.conv("init", 1, 0, 1, F[0], 3);
  n.norm_act("init");
  skip[0] = n.last();
  for (int i = 1; i <= 4; ++i) {
    const std::string d = "down" + std::to_string(i);
    n.conv(d + ".conv0", i + 1, i, F[i - 1], F[i], 3);
    n.norm_act(d + ".0");
    n.conv(d + ".conv1", i + 1, i + 1, F[i], F[i], 3);
    n.norm_act(d + ".1");
    if (i < 4) skip[i] = n.last();
  }
  for (int i = 4; i >= 1; --i) {
    const std::string u = "up" + std::to_string(i);
    n.up(u, i, F[i], F[i - 1]);
    n.concat(u + ".concat", i, skip[i - 1]);
    n.conv(u + ".conv1x1", i, i, 2 * F[i - 1], F[i], 1);
    n.conv(u + ".conv0", i, i, F[i], F[i - 1], 3);
    n.norm_act(u + ".0");
    n.conv(u + ".conv1", i, i, F[i - 1], F[i - 1], 3);
  }
  n.up("up0", 0, F[0], 16);
  n.activation("up0.lrelu");
  n.conv("head", 0, 0, 16, 10, 3);
  return n.sequence();
}

inline LayerSequence dle_nnunet_3d(int64_t side) {
  const int64_t F[] = {32, 64, 128, 256, 320, 320};
  Layers3d n(side, "dle-nnunet-3d", 4, 4);
  int skip[5] = {};
  for (int i = 0; i <= 5; ++i) {
    const std::string d = "enc" + std::to_string(i);
    n.conv(d + ".conv0", i, i == 0 ? 0 : i - 1, i == 0 ? 4 : F[i - 1], F[i], 3);
    n.norm_act(d + ".0");
    n.conv(d + ".conv1", i, i, F[i], F[i], 3);
    n.norm_act(d + ".1");
    if (i < 5) skip[i] = n.last();
  }
  for (int i = 4; i >= 0; --i) {
    const std::string u = "dec" + std::to_string(i);
    n.up(u + ".up", i, F[i + 1], F[i]);
    n.concat(u + ".concat", i, skip[i]);
    n.conv(u + ".conv0", i, i, 2 * F[i], F[i], 3);
    n.norm_act(u + ".0");
    n.conv(u + ".conv1", i, i, F[i], F[i], 3);
    n.norm_act(u + ".1");
  }
  n.conv("head", 0, 0, F[0], 4, 1);
  return n.sequence();
}

}  // namespace tessera::test
