// Step 2: a few training steps on the device follow the CPU's per-step losses (same seed,
// same tiles: the sampler runs on the host either way; fp32, TF32 off).
#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "gpu_check.hpp"
#include "tensor_image.hpp"
#include "tessera/core/tensor_io.hpp"
#include "tessera/core/trainer.hpp"

namespace tessera::gpu_check {
namespace {

struct LossRecorder final : TrainObserver {
  std::vector<double> losses;
  void on_step(const StepMetrics& m) override {
    losses.push_back(m.loss.value_or(std::numeric_limits<double>::quiet_NaN()));
  }
};

std::vector<double> train_losses(UNet& net, const TrainingPair& pair, const TrainOptions& options,
                                 const CheckpointMeta& meta) {
  LossRecorder recorder;
  train(net, {pair}, options, meta, nullptr, {}, &recorder);
  return recorder.losses;
}

}  // namespace

nlohmann::json check_training(const GpuCheckOptions& o, torch::Device device, const std::string& work_dir) {
  const int64_t tile = 2 * unet_alignment(o.model);
  const int64_t side = 2 * (tile + unet_remainder(o.model) + 2 * unet_halo(o.model));
  const torch::Tensor scene = synthetic_scene(o.model.in_channels, side, 5);
  const TensorImage image(scene, "scene"), labels(synthetic_labels(scene, o.model.classes), "labels");
  const TrainingPair pair{&image, &labels, Box{{0, 0}, {side, side}}, nullptr};
  TrainOptions options;
  options.tile = tile;
  options.batch = 2;
  options.steps = o.train_steps;
  options.steps_per_epoch = o.train_steps;
  options.checkpoint_every = o.train_steps;
  options.optimizer.learning_rate = 1e-3;
  options.seed = 6;
  options.progress = false;
  options.run_dir = work_dir + "/train";  // named in messages only: no observer writes files
  CheckpointMeta meta;
  meta.model = o.model;
  meta.norm = identity_normalization(o.model.in_channels);
  for (int c = 0; c < o.model.classes; ++c) meta.class_names.push_back("class" + std::to_string(c));

  UNet cpu = seeded_unet(o, 7);
  UNet dev = copy_to(cpu, device);
  const std::vector<double> on_cpu = train_losses(cpu, pair, options, meta);
  const std::vector<double> on_device = train_losses(dev, pair, options, meta);
  double worst = on_cpu.size() == on_device.size() && !on_cpu.empty() ? 0 : INFINITY;
  for (size_t i = 0; i < std::min(on_cpu.size(), on_device.size()); ++i) {
    const double d = std::abs(on_device[i] - on_cpu[i]) / std::abs(on_cpu[i]);
    worst = std::isfinite(d) ? std::max(worst, d) : INFINITY;  // a NaN loss fails the step
  }
  const bool finite = std::isfinite(worst);
  return {{"steps", o.train_steps},
          {"tile", tile},
          {"batch", options.batch},
          {"losses_cpu", on_cpu},
          {"losses_device", on_device},
          {"worst_rel_diff", finite ? nlohmann::json(worst) : nlohmann::json(nullptr)},
          {"tolerance", o.train_tolerance},
          {"pass", finite && worst <= o.train_tolerance}};
}

}  // namespace tessera::gpu_check
