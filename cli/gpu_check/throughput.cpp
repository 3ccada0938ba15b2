// Step 3: Tessera's tiled inference of a scene on the device (fp32, bf16) against the same
// network in PyTorch eager on the same device (bench/reference/sliding_window.py: sliding
// window, overlap 0.25, Gaussian blending): seconds, peak device memory, useful TFLOP/s (the
// network's FLOPs per output pixel × the scene's pixels, per second), % of the device's peak,
// and the label histograms of both (the same network must label the scene alike).
#include <chrono>
#include <cstdlib>
#include <sstream>

#include <torch/torch.h>

#include "gpu_check.hpp"
#include "reference.hpp"
#include "tensor_image.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/tensor_io.hpp"

namespace tessera::gpu_check {
namespace {

// Labels kept in memory, as a file sink would receive them.
class MemoryLabels final : public LabelSink {
 public:
  explicit MemoryLabels(int64_t side) : labels_(torch::zeros({side, side}, torch::kUInt8)) {}
  void write(const Box& box, const Block<uint8_t>& labels) override {
    const torch::Tensor src = torch::from_blob(const_cast<uint8_t*>(labels.data.data()), {box.size[0], box.size[1]},
                                               torch::kUInt8);
    labels_.narrow(0, box.origin[0], box.size[0]).narrow(1, box.origin[1], box.size[1]).copy_(src);
  }
  void commit() override {}
  std::vector<int64_t> counts(int classes) const {
    const torch::Tensor c = torch::bincount(labels_.flatten().to(torch::kLong), {}, classes);
    return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  }

 private:
  torch::Tensor labels_;
};

struct Run {
  double seconds = 0;
  int64_t peak_bytes = 0;
  double useful_gflop = 0;
  std::vector<int64_t> counts;
};

// The fastest of `repeats` passes of Tessera's streaming inference over the scene.
Run tessera_inference(const GpuCheckOptions& o, UNet& net, const TensorImage& scene, torch::Device device, bool bf16) {
  InferenceOptions options = InferenceOptions().with_tile(o.tile).with_batch(o.batch).with_progress(false);
  if (bf16)  // as `tessera infer --precision bf16`: weights and windows in bfloat16, logits back to fp32
    options.with_forward([](UNet& n, const torch::Tensor& x) { return n->forward(x.to(torch::kBFloat16)).to(torch::kFloat); });
  Run best;
  for (int r = 0; r < o.repeats; ++r) {
    MemoryLabels sink(o.scene);
    synchronize(device);
    reset_peak_memory(device);
    const auto start = std::chrono::steady_clock::now();
    const InferenceReport report = infer_labels(net, scene, identity_normalization(o.model.in_channels), sink, options);
    synchronize(device);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r == 0 || s < best.seconds) best = {s, peak_memory_bytes(device), report.useful_gflops, sink.counts(o.model.classes)};
  }
  return best;
}

// Share of pixels whose class counts differ: sum |Δcount| / 2 / pixels (0: the same histogram).
double histogram_difference(const std::vector<int64_t>& a, const nlohmann::json& b, int64_t pixels) {
  if (!b.is_array() || b.size() != a.size()) return 1;
  int64_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += std::abs(a[i] - b[i].get<int64_t>());
  return double(d) / 2 / double(pixels);
}

nlohmann::json figures(double useful_gflop, double seconds, double peak_mib, double peak_tflops) {
  const double tflops = useful_gflop / seconds / 1000;
  return {{"seconds", seconds},
          {"peak_memory_mib", peak_mib},
          {"useful_tflops", tflops},
          {"pct_of_peak", peak_tflops > 0 ? nlohmann::json(100 * tflops / peak_tflops) : nlohmann::json(nullptr)}};
}

nlohmann::json one_precision(const GpuCheckOptions& o, UNet& cpu_net, const TensorImage& scene, torch::Device device,
                             const std::string& precision, const std::string& work_dir) {
  UNet net = copy_to(cpu_net, device);
  if (precision == "bf16") net->to(torch::kBFloat16);
  const Run t = tessera_inference(o, net, scene, device, precision == "bf16");
  const double peak = device_peak_tflops(o, device, precision);
  const int64_t pixels = o.scene * o.scene;
  nlohmann::json j{{"tessera", figures(t.useful_gflop, t.seconds, double(t.peak_bytes) / (1 << 20), peak)},
                   {"device_peak_tflops", peak > 0 ? nlohmann::json(peak) : nlohmann::json(nullptr)}};
  j["tessera"]["label_counts"] = t.counts;
  // Labels may differ where two logits nearly tie (bf16: many more such pixels).
  const double allowed = precision == "bf16" ? 2e-2 : 1e-3;
  bool pass = true;
  if (!o.python.empty()) {
    const nlohmann::json ref = run_reference(o, device, precision, work_dir);
    if (ref.contains("error")) {
      j["pytorch"] = ref;
      pass = false;
    } else {
      j["pytorch"] = figures(t.useful_gflop, ref.at("infer_seconds").get<double>(),
                             ref.at("peak_device_mib").get<double>(), peak);
      for (const char* k : {"windows", "window_input", "label_counts", "command"}) j["pytorch"][k] = ref.at(k);
      j["speedup"] = ref.at("infer_seconds").get<double>() / t.seconds;
      j["label_histogram_difference"] = histogram_difference(t.counts, ref.at("label_counts"), pixels);
      pass = j["label_histogram_difference"].get<double>() <= allowed;
    }
  }
  j["label_histogram_allowed"] = allowed;
  j["pass"] = pass;
  return j;
}

}  // namespace

nlohmann::json check_throughput(const GpuCheckOptions& o, torch::Device device, const std::string& work_dir) {
  const torch::Tensor scene_tensor = synthetic_scene(o.model.in_channels, o.scene, 8);
  const TensorImage scene(scene_tensor, "scene");
  UNet net = seeded_unet(o, 9);
  if (!o.python.empty()) write_reference_inputs(net, scene_tensor, work_dir);
  nlohmann::json j{{"scene", {o.model.in_channels, o.scene, o.scene}},
                   {"tile", o.tile},
                   {"batch", o.batch},
                   {"overlap", o.overlap},
                   {"repeats", o.repeats},
                   {"useful_gflop_per_pass", unet_flops_per_output_pixel(o.model) * double(o.scene * o.scene) / 1e9}};
  bool pass = true;
  std::stringstream list(o.precisions);
  for (std::string p; std::getline(list, p, ',');) {
    j[p] = one_precision(o, net, scene, device, p, work_dir);
    pass = pass && j[p]["pass"].get<bool>();
  }
  j["pass"] = pass;
  return j;
}

}  // namespace tessera::gpu_check
