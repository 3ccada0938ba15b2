// Step 1: the U-Net on the device computes what it computes on the CPU (fp32, TF32 off), and
// tiled inference on the device equals one whole-image pass on the device.
#include <torch/torch.h>

#include "gpu_check.hpp"
#include "tensor_image.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/tensor_io.hpp"

namespace tessera::gpu_check {
namespace {

// Forward and backward of a batch of two valid tiles: logits and every parameter's gradient.
nlohmann::json forward_backward(const GpuCheckOptions& o, torch::Device device) {
  const int64_t align = unet_alignment(o.model);
  const int64_t side = 2 * align + unet_remainder(o.model) + 2 * unet_halo(o.model);
  UNet cpu = seeded_unet(o, 1);
  UNet dev = copy_to(cpu, device);
  torch::manual_seed(2);
  const torch::Tensor x = torch::randn({2, o.model.in_channels, side, side});
  const torch::Tensor logits_cpu = cpu->forward(x);
  const torch::Tensor logits_dev = dev->forward(x.to(device));
  const torch::Tensor w = torch::randn(logits_cpu.sizes());
  (logits_cpu * w).sum().backward();
  (logits_dev * w.to(device)).sum().backward();
  double worst_grad = 0;
  std::string worst_name;
  auto grads_dev = dev->named_parameters();
  for (const auto& p : cpu->named_parameters()) {
    const double d = relative_difference(grads_dev[p.key()].grad(), p.value().grad());
    if (d >= worst_grad) worst_grad = d, worst_name = p.key();
  }
  const double fwd = relative_difference(logits_dev, logits_cpu);
  const double grad_tol = 10 * o.tolerance;
  return {{"input", {2, o.model.in_channels, side, side}},
          {"forward_rel_diff", fwd},
          {"gradient_rel_diff", worst_grad},
          {"gradient_worst_parameter", worst_name},
          {"tolerance", o.tolerance},
          {"gradient_tolerance", grad_tol},
          {"pass", fwd <= o.tolerance && worst_grad <= grad_tol}};
}

// Tiled inference (three tiles and a part along each axis) against the network applied once to
// the whole image, reflect-padded by the halo as the tiles read it; both on the device.
nlohmann::json tiled_versus_whole(const GpuCheckOptions& o, torch::Device device) {
  const int64_t align = unet_alignment(o.model), halo = unet_halo(o.model), r = unet_remainder(o.model);
  const int64_t tile = 2 * align;
  const int64_t side = o.tiled_side > 0 ? o.tiled_side : 3 * tile + 20;
  const TensorImage image(synthetic_scene(o.model.in_channels, side, 3));
  const Normalization norm = identity_normalization(o.model.in_channels);
  UNet cpu = seeded_unet(o, 4);
  UNet net = copy_to(cpu, device);
  const torch::Tensor tiled =
      infer_logits(net, image, norm, InferenceOptions().with_tile(tile).with_batch(2).with_progress(false));
  int64_t out = side;  // the smallest valid output side covering the image: out ≡ r (mod align)
  while ((out - r) % align != 0) ++out;
  const Window w = read_window(image, Box{{-halo, -halo}, {out + 2 * halo, out + 2 * halo}}, norm);
  torch::Tensor whole;
  {
    c10::InferenceMode guard;
    whole = net->forward(w.values.unsqueeze(0).to(device))[0].narrow(1, 0, side).narrow(2, 0, side).cpu();
  }
  const double diff = relative_difference(tiled, whole);
  const double same_labels = tiled.argmax(0).eq(whole.argmax(0)).to(torch::kDouble).mean().item<double>();
  return {{"image", {o.model.in_channels, side, side}},
          {"tile", tile},
          {"rel_diff", diff},
          {"labels_equal_fraction", same_labels},
          {"tolerance", o.tolerance},
          {"pass", diff <= o.tolerance}};
}

}  // namespace

nlohmann::json check_equality(const GpuCheckOptions& o, torch::Device device) {
  nlohmann::json j;
  j["forward_backward"] = forward_backward(o, device);
  j["tiled_versus_whole"] = tiled_versus_whole(o, device);
  j["pass"] = j["forward_backward"]["pass"].get<bool>() && j["tiled_versus_whole"]["pass"].get<bool>();
  return j;
}

}  // namespace tessera::gpu_check
