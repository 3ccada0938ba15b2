#include "tessera/core/optim.hpp"

#include <cmath>
#include <numbers>

#include <torch/torch.h>

#include "tessera/core/error.hpp"

namespace tessera {

OptimizerKind parse_optimizer_kind(const std::string& name) {
  if (name == "adam") return OptimizerKind::kAdam;
  if (name == "adamw") return OptimizerKind::kAdamW;
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "rmsprop") return OptimizerKind::kRmsProp;
  throw Error("train.optimizer: '" + name + "' is not one of adam, adamw, sgd, rmsprop");
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (name == "constant") return ScheduleKind::kConstant;
  if (name == "step") return ScheduleKind::kStep;
  if (name == "cosine") return ScheduleKind::kCosine;
  if (name == "poly" || name == "polynomial") return ScheduleKind::kPolynomial;
  throw Error("train.schedule: '" + name + "' is not one of constant, step, cosine, poly");
}

std::string to_string(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kAdamW: return "adamw";
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kRmsProp: return "rmsprop";
  }
  return "?";
}

std::string to_string(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::kConstant: return "constant";
    case ScheduleKind::kStep: return "step";
    case ScheduleKind::kCosine: return "cosine";
    case ScheduleKind::kPolynomial: return "poly";
  }
  return "?";
}

void OptimizerOptions::validate() const {
  if (!(learning_rate > 0)) throw Error("train.learning_rate: must be > 0");
  if (momentum < 0 || momentum >= 1) throw Error("train.momentum: must be in [0, 1)");
  if (weight_decay < 0) throw Error("train.weight_decay: must be >= 0");
  if (warmup_steps < 0) throw Error("train.warmup_steps: must be >= 0");
  if (step_size < 1) throw Error("train.step_size: must be >= 1");
  if (!(gamma > 0 && gamma <= 1)) throw Error("train.gamma: must be in (0, 1]");
  if (!(power > 0)) throw Error("train.power: must be > 0");
  if (min_lr_fraction < 0 || min_lr_fraction > 1) throw Error("train.min_lr_fraction: must be in [0, 1]");
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params,
                                                        const OptimizerOptions& o) {
  o.validate();
  switch (o.kind) {
    case OptimizerKind::kAdam:
      return std::make_unique<torch::optim::Adam>(
          params, torch::optim::AdamOptions(o.learning_rate).weight_decay(o.weight_decay));
    case OptimizerKind::kAdamW:
      return std::make_unique<torch::optim::AdamW>(
          params, torch::optim::AdamWOptions(o.learning_rate).weight_decay(o.weight_decay));
    case OptimizerKind::kSgd:
      return std::make_unique<torch::optim::SGD>(
          params, torch::optim::SGDOptions(o.learning_rate).momentum(o.momentum).weight_decay(o.weight_decay));
    case OptimizerKind::kRmsProp:
      return std::make_unique<torch::optim::RMSprop>(
          params, torch::optim::RMSpropOptions(o.learning_rate).momentum(o.momentum).weight_decay(o.weight_decay));
  }
  throw Error("train.optimizer: unknown kind");
}

double learning_rate_at(const OptimizerOptions& o, int64_t step, int64_t total_steps) {
  const double peak = o.learning_rate;
  if (o.warmup_steps > 0 && step <= o.warmup_steps) return peak * double(step) / double(o.warmup_steps);
  const double span = double(std::max<int64_t>(1, total_steps - o.warmup_steps));
  const double t = std::clamp(double(step - o.warmup_steps) / span, 0.0, 1.0);
  const double floor = peak * o.min_lr_fraction;
  switch (o.schedule) {
    case ScheduleKind::kConstant: return peak;
    case ScheduleKind::kStep:
      return peak * std::pow(o.gamma, double((step - o.warmup_steps) / o.step_size));
    case ScheduleKind::kCosine: return floor + (peak - floor) * 0.5 * (1 + std::cos(std::numbers::pi * t));
    case ScheduleKind::kPolynomial: return floor + (peak - floor) * std::pow(1 - t, o.power);
  }
  return peak;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace tessera
