// `tessera plan --calibrate`: this machine's speed and per-layer memory for one model, stored
// in the calibration file (calibration.hpp) that later plans and `bench pipeline` read.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <torch/torch.h>

#include "tessera/core/cpu_tensor_cache.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/engine/calibration.hpp"
#include "tessera/engine/plan_job.hpp"
#include "tessera/parallel/modes/memory_calibration.hpp"

namespace tessera::engine {
namespace {

int64_t aligned_inset(const UNetOptions& o, int64_t tile) {
  const int64_t a = unet_alignment(o);
  return std::max<int64_t>(a, (tile + a - 1) / a * a);
}

int64_t input_side_for_inset(const UNetOptions& o, int64_t inset) {
  return inset + unet_remainder(o) + 2 * unet_halo(o);
}

// Median seconds of forward + backward of one tile; FLOP/s = 3 × forward FLOPs / seconds.
nlohmann::json calibrate_time(UNetImpl& net, const LayerSequence& seq) {
  const UNetOptions& o = seq.options;
  std::vector<int64_t> shape{1, o.in_channels};
  for (int d = 0; d < o.dims; ++d) shape.push_back(seq.input_side);
  const auto x = torch::randn(shape);
  std::vector<double> seconds;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    net.zero_grad();
    net.forward(x).square().mean().backward();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    if (i > 0) seconds.push_back(dt.count());  // the first run warms up allocators
  }
  std::sort(seconds.begin(), seconds.end());
  const double s = seconds[seconds.size() / 2];
  return {{"device_flops", 3.0 * seq.flops() / s}, {"input_side", seq.input_side}, {"seconds_per_step", s}};
}

// Every layer's seconds at `seq` and its memory beyond the stage model at `small` and `seq`.
struct LayerMeasurements {
  std::vector<double> seconds;
  std::vector<int64_t> extra_small, extra;
};

// The layers are timed the way `tessera train` runs them: its memory policy (CpuRunMemoryScope
// at the threshold it takes for this micro-batch: the tensor cache spares re-faulting large
// buffers), `timing.tiles` tiles per pass and its memory format.
LayerMeasurements measure_layers(UNetImpl& net, const LayerSequence& small, const LayerSequence& seq, int64_t inset,
                                 const parallel::LayerTiming& timing) {
  // Times first: measuring memory fixes glibc's mmap threshold, which slows allocation.
  ProgressBar bar("measuring layers", 3 * seq.size(), "layers");
  LayerMeasurements m;
  {
    const CpuRunMemoryScope memory(
        train_mmap_threshold(level0_bytes(timing.tiles, seq.options.base_filters, seq.options.dims, inset)));
    m.seconds = parallel::measure_layer_seconds(net, seq, timing, [&](int done, int) { bar.update(done); });
  }
  m.extra_small = parallel::measure_layer_extra_bytes(net, small, [&](int done, int) { bar.update(seq.size() + done); });
  m.extra = parallel::measure_layer_extra_bytes(net, seq, [&](int done, int) { bar.update(2 * seq.size() + done); });
  bar.finish();
  return m;
}

void print_largest_extra(const std::string& preset, const LayerSequence& small, const LayerSequence& seq,
                         const std::vector<int64_t>& extra) {
  int64_t largest = 0;
  int where = 0;
  for (int i = 0; i < seq.size(); ++i)
    if (extra[size_t(i)] > largest) largest = extra[size_t(where = i)];
  std::printf("%s: layer memory beyond the stage model at input sides %lld and %lld; largest extra %.2f MiB (%s at %lld)\n",
              preset.c_str(), (long long)small.input_side, (long long)seq.input_side, double(largest) / double(1 << 20),
              seq.layers[size_t(where)].name.c_str(), (long long)seq.input_side);
}

}  // namespace

void calibrate_model(const PlanJobOptions& f) {
  const UNetOptions& o = f.model;
  torch::set_num_threads(f.threads);
  const int64_t inset = aligned_inset(o, f.calibration_tile > 0 ? f.calibration_tile : o.dims == 3 ? 32 : 128);
  const int64_t half = aligned_inset(o, inset / 2);
  if (half == inset)
    throw Error("--calibration-tile: " + std::to_string(inset) + " is the smallest inset (" +
                std::to_string(unet_alignment(o)) + "); the memory fit needs two, give at least twice that");
  const LayerSequence seq = unet_layer_sequence(o, input_side_for_inset(o, inset));
  const LayerSequence small = unet_layer_sequence(o, input_side_for_inset(o, half));
  torch::manual_seed(0);
  UNet net(o);
  nlohmann::json entry = calibrate_time(*net, seq);
  const double flops = entry["device_flops"].get<double>(), s = entry["seconds_per_step"].get<double>();
  std::printf("%s: forward + backward of a %lld-px tile in %.3f s = %.1f GFLOP/s\n", f.model_preset.c_str(),
              (long long)seq.input_side, s, flops / 1e9);
  const parallel::LayerTiming timing{f.calibration_batch, f.calibration_channels_last};
  const LayerMeasurements m = measure_layers(*net, small, seq, inset, timing);
  const auto fit = parallel::LayerMemoryCalibration::fit(small, m.extra_small, seq, m.extra);
  const auto times = parallel::LayerTimeCalibration::fit(seq, m.seconds);
  print_largest_extra(f.model_preset, small, seq, m.extra);
  entry["threads"] = f.threads;
  entry["dims"] = o.dims;
  entry["model"] = o;
  entry["memory"] = {{"sides", {small.input_side, seq.input_side}},
                     {"threads", f.threads},
                     {"measured_extra_bytes", {m.extra_small, m.extra}},
                     {"constant_bytes", fit.constant_bytes},
                     {"bytes_per_element", fit.bytes_per_element}};
  entry["time"] = {{"side", seq.input_side},
                   {"tiles", timing.tiles},
                   {"channels_last", timing.channels_last},
                   {"seconds", m.seconds},
                   {"seconds_per_unit", times.seconds_per_unit}};
  const std::filesystem::path path = calibration_path(f.calibration);
  nlohmann::json j = read_calibration(path);
  j["models"][f.model_preset] = entry;
  write_calibration(path, j);
  std::printf("stored in %s\n", path.string().c_str());
}

}  // namespace tessera::engine
