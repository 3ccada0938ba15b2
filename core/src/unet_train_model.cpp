// The plain U-Net as the one trainer's model (train_model.hpp), and the loss of a global batch.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "tessera/core/torch_compat.hpp"
#include "train_model.hpp"

namespace tessera::detail {

// With one replica this is exactly the loss of the batch.
ModelLoss global_batch_loss(const torch::Tensor& logits, const torch::Tensor& target, const LossOptions& o,
                            TrainHooks& hooks, const Decomposition* blocks) {
  const torch::Tensor local = loss_statistics(logits, target, o);
  // Summed in float (bf16 statistics too), in double for a float64 network.
  const auto summed_as = local.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  torch::Tensor global = local.detach().to(summed_as).contiguous().clone();
  if (blocks) global = blocks->image_sum(global).contiguous();
  hooks.sum(global);
  ModelLoss out;
  out.labelled = global[0].item<double>();
  if (out.labelled <= 0) return out;
  const torch::Tensor stats = local + (global.to(local.dtype()) - local.detach());
  out.for_backward = loss_from_statistics(stats, o, logits.size(1));
  out.value = out.for_backward.item<double>();
  return out;
}

double TrainModel::clip_gradients(double max_norm, TrainHooks& /*hooks*/) {
  return torch::nn::utils::clip_grad_norm_(module().parameters(), max_norm);
}

namespace {

// Autocast to bfloat16 for its lifetime (CPU or CUDA), the previous state restored after;
// the cast-weight cache cleared when the outermost one ends.
class Bf16Autocast {
 public:
  Bf16Autocast(bool on, bool cuda) : on_(on), device_(cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU) {
    if (!on_) return;
    was_enabled_ = torch_compat::autocast_enabled(device_);
    was_dtype_ = torch_compat::autocast_dtype(device_);
    torch_compat::set_autocast_enabled(device_, true);
    torch_compat::set_autocast_dtype(device_, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~Bf16Autocast() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    torch_compat::set_autocast_enabled(device_, was_enabled_);
    torch_compat::set_autocast_dtype(device_, was_dtype_);
  }
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  bool on_;
  c10::DeviceType device_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

// The plain U-Net and its segmentation loss over the global batch; pipeline hooks run its
// forward and backward across their stages themselves.
class UNetModel : public TrainModel {
 public:
  explicit UNetModel(UNet& net) : net_(net) {}
  UNet& unet() override { return net_; }
  torch::nn::Module& module() override { return *net_; }
  ModelLoss loss(std::vector<Sample>& samples, const TrainOptions& o, TrainHooks& hooks, double share,
                 double /*progress*/) override {
    const Sample& s = samples.front();
    if (std::optional<HookedStep> hooked = hooks.forward_backward(net_, s.input, s.target, o.loss, share)) {
      ModelLoss loss;
      loss.value = hooked->loss;
      loss.labelled = hooked->labelled;
      return loss;
    }
    torch::Tensor logits;
    {
      const Bf16Autocast amp(o.precision == "bf16", s.input.is_cuda());
      logits = net_->forward(s.input);
    }
    if (logits.scalar_type() != torch::kFloat32) logits = logits.to(torch::kFloat32);  // the loss in fp32
    return detail::global_batch_loss(logits, s.target, o.loss, hooks);
  }

 private:
  UNet& net_;
};

}  // namespace

std::unique_ptr<TrainModel> unet_train_model(UNet& net) { return std::make_unique<UNetModel>(net); }

}  // namespace tessera::detail
