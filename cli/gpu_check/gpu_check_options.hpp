#pragma once
// What tessera-gpu-check is asked, declared once: fields() drives its flags (`train_steps` →
// --train-steps), their help and shown defaults; validate() names the flag. The check itself:
// gpu_check.hpp. Torch-free.
#include <cstdint>
#include <string>

#include "tessera/core/options_binding.hpp"
#include "tessera/core/unet_spec.hpp"

namespace tessera::gpu_check {

struct GpuCheckOptions {
  std::string device = "cuda";  ///< cuda (device 0), or cpu: the dry run of every step
  std::string out = "gpu_check.json";
  /// The network of every step: unet-small (L 5, n_c 2, 64 filters, valid, 4 bands, 4 classes).
  UNetOptions model = UNetOptions().with_levels(5).with_base_filters(64).with_in_channels(4).with_classes(4);
  double tolerance = 1e-4;        ///< fp32: max |device − CPU| / max |CPU| of logits and gradients
  int64_t tiled_side = 0;         ///< image side of the tiled-vs-whole check; 0: 3 tiles + 20
  int train_steps = 4;            ///< training steps on the CPU and on the device
  double train_tolerance = 1e-3;  ///< per-step |loss_device − loss_cpu| / loss_cpu
  int64_t scene = 4096;           ///< throughput: the scene's side (4 bands)
  int64_t tile = 512;             ///< throughput: Tessera's inset side (and the reference's window)
  int batch = 4;                  ///< throughput: tiles per forward (Tessera and the reference)
  int repeats = 2;                ///< throughput: passes of each; the fastest is reported
  std::string precisions = "fp32,bf16";
  std::string python = "python3";  ///< runs the PyTorch reference; "" = no reference
  std::string reference = TESSERA_REFERENCE_SCRIPT;  ///< bench/reference/sliding_window.py
  double overlap = 0.25;          ///< the reference's sliding-window overlap
  double peak_tflops_fp32 = 0;    ///< the device's peak; 0: from the device name (docs/gpu.md)
  double peak_tflops_bf16 = 0;

  /// Throws tessera::Error naming the flag.
  void validate() const;
};

template <class V>
void fields(GpuCheckOptions& o, V& v) {
  v.field("device", o.device, "cuda (device 0), or cpu: every step on the CPU (the dry run)");
  v.field("out", o.out, "Where the JSON report goes");
  fields(o.model, v);
  v.field("tolerance", o.tolerance, "fp32 tolerance: max |device - CPU| / max |CPU| (logits, gradients, tiling)");
  v.field("tiled_side", o.tiled_side, "Image side of the tiled-vs-whole check (0: three tiles and a bit)");
  v.field("train_steps", o.train_steps, "Training steps compared between the CPU and the device");
  v.field("train_tolerance", o.train_tolerance, "Per-step relative tolerance of the training losses");
  v.field("scene", o.scene, "Throughput: side of the square 4-band scene");
  v.field("tile", o.tile, "Throughput: Tessera's inset side and the reference's window (roi)");
  v.field("batch", o.batch, "Throughput: tiles (windows) per forward");
  v.field("repeats", o.repeats, "Throughput: passes of each; the fastest counts");
  v.field("precisions", o.precisions, "Throughput: fp32, bf16 or both (comma-separated)");
  v.field("python", o.python, "Python with PyTorch for the reference (empty: no reference)");
  v.field("reference", o.reference, "The PyTorch reference script (bench/reference/sliding_window.py)");
  v.field("overlap", o.overlap, "The reference's sliding-window overlap");
  v.field("peak_tflops_fp32", o.peak_tflops_fp32, "Device fp32 peak, TFLOP/s (0: by device name)");
  v.field("peak_tflops_bf16", o.peak_tflops_bf16, "Device bf16 peak, TFLOP/s (0: by device name)");
}

}  // namespace tessera::gpu_check
