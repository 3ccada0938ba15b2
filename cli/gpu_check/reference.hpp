#pragma once
// The PyTorch side of the throughput step: the files bench/reference/sliding_window.py reads
// (model.pt, model.json as `tessera export` writes them; the scene as a torch.save'd tensor) and
// one run of it, its JSON line parsed.
#include <string>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "gpu_check_options.hpp"
#include "tessera/core/unet.hpp"

namespace tessera::gpu_check {

/// Writes WORK/model.pt, WORK/model.json and WORK/scene.pt (scene: (C, H, W) float).
void write_reference_inputs(UNet& net, const torch::Tensor& scene, const std::string& work_dir);

/// Runs the reference on WORK's files with `precision` on `device`; its last stdout line as
/// JSON, or {"error": "..."} when it failed or printed none.
nlohmann::json run_reference(const GpuCheckOptions& o, torch::Device device, const std::string& precision,
                             const std::string& work_dir);

}  // namespace tessera::gpu_check
