#include "tessera/engine/plan_options.hpp"

#include <cmath>

#include "../flag_checks.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/engine/layout_json.hpp"

namespace tessera::engine {
namespace {

// --calibrate measures the model alone: its tile and its threads.
void validate_calibration(const PlanJobOptions& o) {
  if (o.calibration_tile < 0)
    throw Error("plan: --calibration-tile must be >= 0 (0: 128, 3-D 32), got " + std::to_string(o.calibration_tile));
  if (o.threads < 1) throw Error("plan: --threads must be >= 1, got " + std::to_string(o.threads));
  if (o.calibration_batch < 1)
    throw Error("plan: --calibration-batch must be >= 1, got " + std::to_string(o.calibration_batch));
}

}  // namespace

void PlanJobOptions::validate() const {
  if (calibrate) return validate_calibration(*this);
  if (!dataset.empty()) {
    if (!image.empty()) throw Error("plan: give one of --dataset, --image");
    if (!(device_memory >= 0)) throw Error("plan: --device-memory must be >= 0 GiB (0: this machine's)");
    if (devices < 1) throw Error("plan: --devices must be >= 1, got " + std::to_string(devices));
    return;
  }
  if (image.empty()) throw Error("plan: --image is required (W×H or W×H×D), or --dataset DIR");
  if (train && infer) throw Error("plan: give one of --train, --infer");
  if (!(device_memory > 0)) throw Error("plan: --device-memory must be > 0 GiB");
  if (devices < 1) throw Error("plan: --devices must be >= 1, got " + std::to_string(devices));
  if (domains < 1 || domains > devices)
    throw Error("plan: --domains must be in 1 … --devices (" + std::to_string(devices) + "), got " + std::to_string(domains));
  if (domains > 1 && infer) throw Error("plan: --domains is for training plans (a DSN trains; drop --infer)");
  if (tile < 0) throw Error("plan: --tile must be >= 0 (0: the planner chooses), got " + std::to_string(tile));
  if (!(throughput >= 0 && std::isfinite(throughput)))
    throw Error("plan: --throughput must be >= 0 GFLOP/s (0: calibrated or default), got " + std::to_string(throughput));
  parse_image(image);  // names --image
  check_flag("--schedule", [&] { parse_pipeline_schedule(schedule); });
  if (activation_checkpoint != "auto")
    check_flag("--activation-checkpoint", [&] { parse_activation_checkpoint(activation_checkpoint); });
}

}  // namespace tessera::engine
