#include "gpu_check_options.hpp"

#include <filesystem>

#include "tessera/core/error.hpp"

namespace tessera::gpu_check {

void GpuCheckOptions::validate() const {
  if (device != "cuda" && device != "cpu") throw Error("--device " + device + ": must be cuda or cpu");
  if (out.empty()) throw Error("--out: must name the JSON report");
  model.validate();
  if (model.dims != 2 || !model.is_builtin() || model.padding != Padding::kValid)
    throw Error("--dims/--name/--padding: the check runs the built-in 2-D U-Net with valid padding");
  if (!(tolerance > 0) || !(train_tolerance > 0)) throw Error("--tolerance/--train-tolerance: must be > 0");
  if (train_steps < 1) throw Error("--train-steps: must be >= 1");
  if (tile <= 0 || tile % unet_alignment(model) != 0)
    throw Error("--tile " + std::to_string(tile) + ": must be a positive multiple of " +
                std::to_string(unet_alignment(model)));
  if (scene < tile) throw Error("--scene " + std::to_string(scene) + ": must be at least --tile");
  if (batch < 1 || repeats < 1) throw Error("--batch/--repeats: must be >= 1");
  if (!(overlap >= 0 && overlap < 1)) throw Error("--overlap: must be in [0, 1)");
  if (precisions != "fp32" && precisions != "bf16" && precisions != "fp32,bf16" && precisions != "bf16,fp32")
    throw Error("--precisions " + precisions + ": fp32, bf16 or fp32,bf16");
  if (!python.empty() && !std::filesystem::is_regular_file(reference))
    throw Error("--reference " + reference + ": no such file");
}

}  // namespace tessera::gpu_check
