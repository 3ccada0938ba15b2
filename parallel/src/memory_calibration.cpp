#include "tessera/parallel/memory_calibration.hpp"

#include <torch/torch.h>

#include "tessera/core/losses.hpp"
#include "tessera/core/process_memory.hpp"
#include "tessera/core/unet_stages.hpp"
#include "tessera/parallel/planner.hpp"

namespace tessera::parallel {

std::vector<int64_t> measure_layer_extra_bytes(const UNetImpl& full, const LayerSequence& seq,
                                               const std::function<void(int, int)>& progress) {
  const int n = seq.size();
  const auto model = StageMemoryOptions().with_micro_batches(1);
  const LossOptions ce = LossOptions().with_kind(LossKind::kCrossEntropy);
  std::vector<int64_t> target_shape{1};
  for (int d = 0; d < seq.options.dims; ++d) target_shape.push_back(seq.output_side);
  const torch::Tensor target = torch::randint(0, seq.options.classes, target_shape, torch::kInt64);

  std::vector<int64_t> extra;
  for (int i = 0; i < n; ++i) {
    UNetStage stage(full, seq, i, i);
    auto step = [&] {
      StageTensors in;
      in.main = torch::randn(stage->input_shape(1));
      if (i > 0) in.main.requires_grad_(true);  // a received activation; the network input needs none
      for (int e : stage->skips_in()) in.skips[e] = torch::randn(stage->skip_shape(e, 1)).requires_grad_(true);
      StageTensors out = stage->forward(in);
      if (i == n - 1) {
        loss_from_statistics(loss_statistics(out.main, target, ce), ce, seq.options.classes).backward();
        return;
      }
      std::vector<torch::Tensor> outputs{out.main}, grads{torch::randn_like(out.main)};
      for (const auto& [e, t] : out.skips) {
        outputs.push_back(t);
        grads.push_back(torch::randn_like(t));
      }
      torch::autograd::backward(outputs, grads);
    };
    step();  // gradients allocated, kernels and their caches set up
    int64_t measured = 0;
    {
      PeakMemoryMeter meter;
      step();
      measured = meter.peak_increase();
    }
    const int64_t predicted = stage_bytes(seq, i, i, 1, model) - 16 * seq.layers[size_t(i)].params;
    extra.push_back(measured - predicted);
    if (progress) progress(i + 1, n);
  }
  return extra;
}

}  // namespace tessera::parallel
