// The plain U-Net as the one trainer's model (train_model.hpp), and the loss of a global batch.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "deep_supervision.hpp"
#include "tessera/core/error.hpp"
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
// forward and backward across their stages themselves. With deep supervision, heads on the
// decoder's lower levels add their weighted losses (deep_supervision.hpp); they train beside
// the U-Net (module() holds both) and are the checkpoint's extra module.
class UNetModel : public TrainModel {
 public:
  UNetModel(UNet& net, bool deep_supervision) : net_(net) {
    if (!deep_supervision) return;
    heads_ = DeepSupervisionHeads(net->options());
    heads_->to(net->device());
    both_ = std::make_shared<torch::nn::Module>();
    both_->register_module("unet", net.ptr());
    both_->register_module("deep_supervision", heads_);
  }
  UNet& unet() override { return net_; }
  torch::nn::Module& module() override { return both_ ? *both_ : *net_; }
  ModelLoss loss(std::vector<Sample>& samples, const TrainOptions& o, TrainHooks& hooks, double share,
                 double /*progress*/) override {
    const Sample& s = samples.front();
    if (std::optional<HookedStep> hooked = hooks.forward_backward(net_, s.input, s.target, o.loss, share)) {
      ModelLoss loss;
      loss.value = hooked->loss;
      loss.labelled = hooked->labelled;
      return loss;
    }
    if (heads_) return deep_loss(s, o, hooks);
    torch::Tensor logits;
    {
      const Bf16Autocast amp(o.precision == "bf16", s.input.is_cuda());
      logits = net_->forward(s.input);
    }
    if (logits.scalar_type() != torch::kFloat32) logits = logits.to(torch::kFloat32);  // the loss in fp32
    return detail::global_batch_loss(logits, s.target, o.loss, hooks);
  }
  // The heads are not the U-Net the hooks sum: their gradient shares are summed here.
  void on_gradients(TrainHooks& hooks) override {
    if (!heads_ || hooks.replicas() == 1) return;
    std::vector<torch::Tensor> grads;
    for (auto& p : heads_->parameters())  // a level without labels on every replica left none
      grads.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
    torch::Tensor flat = torch::cat(grads).to(torch::kCPU, torch::kFloat).contiguous();
    hooks.sum(flat);
    int64_t at = 0;
    for (auto& p : heads_->parameters()) {
      const torch::Tensor sum = flat.narrow(0, at, p.numel()).view_as(p).to(p.device());
      if (p.grad().defined()) p.mutable_grad().copy_(sum);
      else p.mutable_grad() = sum.clone();
      at += p.numel();
    }
  }
  CheckpointParts checkpoint_parts(torch::optim::Optimizer& optimizer, const OptimizerOptions& /*options*/,
                                   TrainHooks& /*hooks*/) override {
    return {heads_ ? heads_.get() : nullptr, &optimizer};
  }
  void resume_extra(const std::string& path, const CheckpointMeta& /*meta*/, torch::optim::Optimizer& optimizer,
                    const OptimizerOptions& /*options*/) override {
    if (heads_) {
      try {
        load_checkpoint_extra(path, *heads_);
      } catch (const Error& e) {
        throw Error(path + ": no deep supervision heads to resume (" + e.what() + "); train.deep_supervision must match the run's");
      }
    }
    load_optimizer_state(path, optimizer);
  }

 private:
  // The full-resolution loss and every head's, weighted (deep_supervision_weights).
  ModelLoss deep_loss(const Sample& s, const TrainOptions& o, TrainHooks& hooks) {
    std::map<int, torch::Tensor> features;
    torch::Tensor logits;
    std::map<int, torch::Tensor> aux;
    {
      const Bf16Autocast amp(o.precision == "bf16", s.input.is_cuda());
      logits = forward_keeping_decoder(net_, s.input, heads_->levels(), features);
      for (const auto& [level, f] : features) aux[level] = heads_->forward(level, f).to(torch::kFloat32);
    }
    const std::vector<double> w = deep_supervision_weights(net_->options().levels);
    ModelLoss out = detail::global_batch_loss(logits.to(torch::kFloat32), s.target, o.loss, hooks);
    if (out.labelled <= 0) return out;
    out.for_backward = out.for_backward * w[0];
    out.value *= w[0];
    for (const auto& [level, a] : aux) {  // every replica sums every level's statistics
      const ModelLoss l = detail::global_batch_loss(a, target_at_level(s.target, level), o.loss, hooks);
      if (l.labelled <= 0) continue;
      out.for_backward = out.for_backward + w[size_t(level)] * l.for_backward;
      out.value += w[size_t(level)] * l.value;
    }
    return out;
  }

  UNet& net_;
  DeepSupervisionHeads heads_{nullptr};
  std::shared_ptr<torch::nn::Module> both_;
};

}  // namespace

std::unique_ptr<TrainModel> unet_train_model(UNet& net, bool deep_supervision) {
  return std::make_unique<UNetModel>(net, deep_supervision);
}

}  // namespace tessera::detail
