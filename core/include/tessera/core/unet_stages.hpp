#pragma once
// One pipeline stage of a U-Net: the consecutive layers [first, last] of its forward sequence
// (layer_sequence.hpp; UNetImpl::layer_sequence, a registry model's with its block tails) as a
// module of their own, holding copies of those layers' parameters only, under the full model's
// parameter names (enc0.conv0.weight, up1.bias, head.weight …; model.enc0.se.fc1.weight),
// so a stage's gradients can be compared with, or written back into, the full model's.
//
// Running stages 0 … K−1 one after another, handing each stage's outputs to the later ones,
// computes exactly UNetImpl::forward: both are run_layers (unet.hpp), over a range here and
// over all layers there.
//
// What crosses a stage boundary for one micro-batch (tensors NCHW / NCDHW, float):
//   main   the output of layer first − 1 (in) / of layer last (out);
//   skips  by index e into LayerSequence::skips: an encoder output produced in one stage and
//          consumed by a concatenation in a later stage, centre-cropped by the producer to the
//          consumer's side (LayerSequence::skips[e].cropped_elements per sample). A skip goes
//          straight from the producing stage to the consuming one: stages in between neither
//          receive nor send it. Skips produced and consumed inside one stage never leave it.
// Not thread safe: one forward at a time, like UNetImpl.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <map>
#include <vector>

#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/unet.hpp"

namespace tessera {

/// The tensors entering or leaving a stage for one micro-batch (see the header comment).
struct StageTensors {
  torch::Tensor main;
  std::map<int, torch::Tensor> skips;  ///< skip index e → tensor cropped to the consumer's side
};

class UNetStageImpl : public torch::nn::Module {
 public:
  /// Layers [first, last] of `seq`, which must be full.layer_sequence(side) for some input
  /// side. Parameters (and batch-norm buffers) are copied from `full`; the stage shares no
  /// storage with it (a registry model's block tails are built by their fresh()). Throws
  /// tessera::Error naming `first`/`last` when the range is empty or outside the sequence,
  /// `seq` when it describes another model, or the model when its modules are not the
  /// sequence it declares (a tail that is no BlockTail, a parameter missing or of another shape).
  UNetStageImpl(const UNetImpl& full, LayerSequence seq, int first, int last);

  /// Runs the stage. `in.main` is the network input for the stage holding layer 0, else the
  /// previous stage's `out.main`; `in.skips` must hold exactly skips_in(). The result holds
  /// the last layer's output and exactly skips_out().
  StageTensors forward(const StageTensors& in);

  int first() const { return first_; }
  int last() const { return last_; }
  const LayerSequence& sequence() const { return seq_; }
  /// Skips consumed here and produced in an earlier stage (ascending skip index).
  const std::vector<int>& skips_in() const { return skips_in_; }
  /// Skips produced here and consumed in a later stage (ascending skip index).
  const std::vector<int>& skips_out() const { return skips_out_; }

  /// Shapes for `batch` samples: the main input, the main output, skip e as sent.
  std::vector<int64_t> input_shape(int64_t batch) const;
  std::vector<int64_t> output_shape(int64_t batch) const;
  std::vector<int64_t> skip_shape(int e, int64_t batch) const;

 private:
  torch::nn::Module& holder(const std::string& name);
  std::vector<int64_t> shape(int64_t batch, int64_t channels, int64_t side) const;

  LayerSequence seq_;
  int first_, last_;
  std::vector<int> skips_in_, skips_out_;
  std::map<std::string, std::shared_ptr<torch::nn::Module>> holders_;  // enc0, model.dec1 … (name scopes, by path)
  std::vector<LayerModules> modules_;  // of layers first … last
};
TORCH_MODULE(UNetStage);

}  // namespace tessera
