#pragma once
// Optimisers and learning-rate schedules for the trainer. The schedule is a pure function
// of the step, so a resumed run continues it exactly from the checkpoint's step (no
// scheduler state to save beyond the step itself).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace torch::optim {
class Optimizer;
}

namespace tessera {

enum class OptimizerKind { kAdam, kAdamW, kSgd, kRmsProp };
enum class ScheduleKind { kConstant, kStep, kCosine, kPolynomial };

OptimizerKind parse_optimizer_kind(const std::string& name);  ///< adam, adamw, sgd, rmsprop
ScheduleKind parse_schedule_kind(const std::string& name);    ///< constant, step, cosine, poly
std::string to_string(OptimizerKind k);
std::string to_string(ScheduleKind k);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdam;
  double learning_rate = 1e-3;   ///< peak learning rate (after warm-up)
  double momentum = 0.9;         ///< SGD (Nesterov off) and RMSProp
  double weight_decay = 0;       ///< L2 (Adam, SGD, RMSProp) or decoupled (AdamW)
  ScheduleKind schedule = ScheduleKind::kConstant;
  int64_t warmup_steps = 0;      ///< linear warm-up from lr / warmup_steps to lr
  int64_t step_size = 1000;      ///< kStep: multiply by `gamma` every step_size steps
  double gamma = 0.1;            ///< kStep factor
  double power = 0.9;            ///< kPolynomial: (1 − t/T)^power
  double min_lr_fraction = 0;    ///< kCosine / kPolynomial end at lr · min_lr_fraction

  /// Throws tessera::Error naming the bad field.
  void validate() const;
};

/// A new optimiser of `o.kind` over `params` at o.learning_rate.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params,
                                                        const OptimizerOptions& o);

/// Learning rate at optimiser step `step` (1-based) of `total_steps`: warm-up, then the schedule
/// over the steps after warm-up.
double learning_rate_at(const OptimizerOptions& o, int64_t step, int64_t total_steps);

/// Sets every parameter group's learning rate.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace tessera
