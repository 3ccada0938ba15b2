#include "tessera/parallel/plan/layer_costs.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tessera/core/error.hpp"

namespace tessera::parallel {
namespace {

constexpr int64_t kFloatBytes = 4;

}  // namespace

std::vector<int64_t> LayerMemoryCalibration::extra_bytes(const LayerSequence& seq) const {
  if (constant_bytes.size() != size_t(seq.size()) || bytes_per_element.size() != size_t(seq.size()))
    throw Error(fmt::format("calibration: {} layers measured, the model has {} (recalibrate: tessera plan --calibrate)",
                            constant_bytes.size(), seq.size()));
  std::vector<int64_t> out;
  for (int i = 0; i < seq.size(); ++i) {
    const Layer& l = seq.layers[size_t(i)];
    const double e = constant_bytes[size_t(i)] + bytes_per_element[size_t(i)] * double(l.in_elements + l.out_elements);
    out.push_back(std::max<int64_t>(0, std::llround(e)));
  }
  return out;
}

LayerMemoryCalibration LayerMemoryCalibration::fit(const LayerSequence& a, const std::vector<int64_t>& extra_a,
                                                   const LayerSequence& b, const std::vector<int64_t>& extra_b) {
  const size_t n = a.layers.size();
  if (b.layers.size() != n || extra_a.size() != n || extra_b.size() != n)
    throw Error(fmt::format("calibration: layer counts differ ({}, {}, {} and {} measurements)", n, b.layers.size(),
                            extra_a.size(), extra_b.size()));
  LayerMemoryCalibration c;
  for (size_t i = 0; i < n; ++i) {
    const double xa = double(a.layers[i].in_elements + a.layers[i].out_elements);
    const double xb = double(b.layers[i].in_elements + b.layers[i].out_elements);
    if (xa == xb)
      throw Error("calibration: layer " + a.layers[i].name + " has the same size at both sides; use two different sides");
    const double slope = double(extra_b[i] - extra_a[i]) / (xb - xa);
    c.bytes_per_element.push_back(slope);
    c.constant_bytes.push_back(double(extra_a[i]) - slope * xa);
  }
  return c;
}

namespace {
double work_units(const Layer& l) { return l.flops > 0 ? l.flops : double(l.in_elements + l.out_elements); }
}  // namespace

std::vector<double> LayerTimeCalibration::seconds(const LayerSequence& seq) const {
  if (seconds_per_unit.size() != size_t(seq.size()))
    throw Error(fmt::format("calibration: {} layer times measured, the model has {} layers (recalibrate: tessera plan "
                            "--calibrate)",
                            seconds_per_unit.size(), seq.size()));
  std::vector<double> out;
  for (int i = 0; i < seq.size(); ++i) out.push_back(seconds_per_unit[size_t(i)] * work_units(seq.layers[size_t(i)]));
  return out;
}

LayerTimeCalibration LayerTimeCalibration::fit(const LayerSequence& seq, const std::vector<double>& seconds) {
  if (seconds.size() != size_t(seq.size()))
    throw Error(fmt::format("calibration: {} layer times for {} layers", seconds.size(), seq.size()));
  LayerTimeCalibration c;
  for (int i = 0; i < seq.size(); ++i) c.seconds_per_unit.push_back(seconds[size_t(i)] / work_units(seq.layers[size_t(i)]));
  return c;
}

std::vector<double> predicted_layer_seconds(const LayerSequence& seq, double device_flops,
                                            double memory_bytes_per_second, bool training) {
  std::vector<double> t;
  for (const auto& l : seq.layers)
    t.push_back((l.flops / device_flops +
                 double((l.in_elements + l.out_elements) * kFloatBytes) / memory_bytes_per_second) *
                (training ? 3.0 : 1.0));
  return t;
}

}  // namespace tessera::parallel
