#include "tessera/parallel/modes/memory_calibration.hpp"

#include <algorithm>
#include <chrono>

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/losses.hpp"
#include "tessera/run/process_memory.hpp"
#include "tessera/core/unet_stages.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"

namespace tessera::parallel {

namespace {

// One layer as a pipeline stage of its own, with what a pipeline step hands it: `timing.tiles`
// tiles per pass, channels-last weights and arrivals when `timing.channels_last`.
class OneLayer {
 public:
  OneLayer(const UNetImpl& full, const LayerSequence& seq, int i, const torch::Tensor& target, LayerTiming timing = {})
      : seq_(seq), i_(i), stage_(full, seq, i, i), target_(target), timing_(timing) {
    torch::NoGradGuard no_grad;
    if (timing_.channels_last)
      for (auto& p : stage_->parameters())
        if (p.dim() == seq.options.dims + 2) p.set_data(laid_out(p));
  }

  // What arrives: the stage's inputs, and the gradients of what it sends on.
  struct Arrivals {
    StageTensors in;
    std::vector<torch::Tensor> grads;
  };
  Arrivals arrive() {
    const int64_t b = timing_.tiles;
    Arrivals a;
    a.in.main = laid_out(torch::randn(stage_->input_shape(b)));
    if (i_ > 0) a.in.main.requires_grad_(true);  // a received activation; the network input needs none
    for (int e : stage_->skips_in()) a.in.skips[e] = laid_out(torch::randn(stage_->skip_shape(e, b))).requires_grad_(true);
    if (!last()) {
      a.grads.push_back(laid_out(torch::randn(stage_->output_shape(b))));
      for (int e : stage_->skips_out()) a.grads.push_back(laid_out(torch::randn(stage_->skip_shape(e, b))));
    }
    return a;
  }
  void step(const Arrivals& a) {
    StageTensors res = stage_->forward(a.in);
    if (last()) {
      const LossOptions ce = LossOptions().with_kind(LossKind::kCrossEntropy);
      loss_from_statistics(loss_statistics(res.main, target_, ce), ce, seq_.options.classes).backward();
      return;
    }
    std::vector<torch::Tensor> outputs{res.main};
    for (int e : stage_->skips_out()) outputs.push_back(res.skips.at(e));
    torch::autograd::backward(outputs, a.grads);
  }

 private:
  bool last() const { return i_ == seq_.size() - 1; }
  // Channels-last for image tensors (N, C, spatial…) when timing asks, as UNetImpl::use_channels_last.
  torch::Tensor laid_out(const torch::Tensor& t) const {
    if (!timing_.channels_last || t.dim() != seq_.options.dims + 2) return t;
    return t.contiguous(seq_.options.dims == 2 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d);
  }
  const LayerSequence& seq_;
  int i_;
  UNetStage stage_;
  torch::Tensor target_;
  LayerTiming timing_;
};

torch::Tensor random_target(const LayerSequence& seq, int64_t tiles = 1) {
  std::vector<int64_t> shape{tiles};
  for (int d = 0; d < seq.options.dims; ++d) shape.push_back(seq.output_side);
  return torch::randint(0, seq.options.classes, shape, torch::kInt64);
}

}  // namespace

std::vector<int64_t> measure_layer_extra_bytes(const UNetImpl& full, const LayerSequence& seq,
                                               const std::function<void(int, int)>& progress) {
  const auto model = StageMemoryOptions().with_micro_batches(1);
  const torch::Tensor target = random_target(seq);
  std::vector<int64_t> extra;
  for (int i = 0; i < seq.size(); ++i) {
    OneLayer layer(full, seq, i, target);
    layer.step(layer.arrive());  // gradients allocated, kernels and their caches set up
    int64_t measured = 0;
    {
      PeakMemoryMeter meter;
      layer.step(layer.arrive());  // the arrivals are allocated in the meter's span, as received ones would be
      measured = meter.peak_increase();
    }
    extra.push_back(measured - (stage_bytes(seq, i, i, 1, model) - 16 * seq.layers[size_t(i)].params));
    if (progress) progress(i + 1, seq.size());
  }
  return extra;
}

std::vector<double> measure_layer_seconds(const UNetImpl& full, const LayerSequence& seq, const LayerTiming& timing,
                                          const std::function<void(int, int)>& progress) {
  if (timing.tiles < 1) throw Error("layer timing: tiles must be >= 1, got " + std::to_string(timing.tiles));
  const torch::Tensor target = random_target(seq, timing.tiles);
  std::vector<double> seconds;
  for (int i = 0; i < seq.size(); ++i) {
    OneLayer layer(full, seq, i, target, timing);
    layer.step(layer.arrive());  // warm-up
    std::vector<double> runs;
    for (int r = 0; r < 3; ++r) {
      const auto a = layer.arrive();
      const auto t0 = std::chrono::steady_clock::now();
      layer.step(a);
      runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(runs.begin(), runs.end());
    seconds.push_back(runs[1] / double(timing.tiles));
    if (progress) progress(i + 1, seq.size());
  }
  return seconds;
}

}  // namespace tessera::parallel
