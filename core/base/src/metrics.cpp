#include "tessera/core/metrics.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double ratio(double num, double den) { return den > 0 ? num / den : kNaN; }

// The class index of a label value, or -1 when it is not an integer in [0, classes).
template <class T>
int64_t class_of(T v, int classes) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v) || v < 0 || v >= classes || v != std::floor(v)) return -1;
    return static_cast<int64_t>(v);
  } else {
    const auto x = static_cast<int64_t>(v);
    return x >= 0 && x < classes ? x : -1;
  }
}

template <class T>
bool ignored(T truth, T ignore) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(truth)) return true;
  }
  return truth == ignore;
}

}  // namespace

double nan_mean(const std::vector<double>& values) {
  double sum = 0;
  int n = 0;
  for (double v : values)
    if (std::isfinite(v)) {
      sum += v;
      ++n;
    }
  return n ? sum / n : kNaN;
}

ConfusionCounts::ConfusionCounts(int classes) {
  TESSERA_CHECK(classes >= 0);
  tp_.assign(static_cast<size_t>(classes), 0);
  fp_ = tp_;
  fn_ = tp_;
}

template <class T>
void ConfusionCounts::add(const T* prediction, const T* truth, int64_t n, T ignore) {
  const int c = classes();
  for (int64_t i = 0; i < n; ++i) {
    if (ignored(truth[i], ignore)) continue;
    const int64_t t = class_of(truth[i], c);
    if (t < 0)
      throw Error("metrics: truth label " + std::to_string(truth[i]) + " is not a class in [0, " + std::to_string(c) +
                  ")");
    const int64_t p = class_of(prediction[i], c);
    if (p == t) {
      ++tp_[static_cast<size_t>(t)];
    } else {
      ++fn_[static_cast<size_t>(t)];
      if (p >= 0) ++fp_[static_cast<size_t>(p)];
    }
  }
}

template void ConfusionCounts::add<uint8_t>(const uint8_t*, const uint8_t*, int64_t, uint8_t);
template void ConfusionCounts::add<uint16_t>(const uint16_t*, const uint16_t*, int64_t, uint16_t);
template void ConfusionCounts::add<int32_t>(const int32_t*, const int32_t*, int64_t, int32_t);
template void ConfusionCounts::add<int64_t>(const int64_t*, const int64_t*, int64_t, int64_t);
template void ConfusionCounts::add<float>(const float*, const float*, int64_t, float);

void ConfusionCounts::merge(const ConfusionCounts& other) {
  if (other.classes() != classes())
    throw Error("metrics: cannot merge counts of " + std::to_string(other.classes()) + " classes into " +
                std::to_string(classes()));
  for (size_t c = 0; c < tp_.size(); ++c) {
    tp_[c] += other.tp_[c];
    fp_[c] += other.fp_[c];
    fn_[c] += other.fn_[c];
  }
}

std::vector<int64_t> ConfusionCounts::as_vector() const {
  std::vector<int64_t> v = tp_;
  v.insert(v.end(), fp_.begin(), fp_.end());
  v.insert(v.end(), fn_.begin(), fn_.end());
  return v;
}

ConfusionCounts ConfusionCounts::from_vector(const std::vector<int64_t>& v) {
  if (v.size() % 3 != 0)
    throw Error("metrics: a vector of " + std::to_string(v.size()) + " counts is not TP, FP, FN per class");
  const size_t c = v.size() / 3;
  ConfusionCounts out(static_cast<int>(c));
  for (size_t i = 0; i < c; ++i) {
    out.tp_[i] = v[i];
    out.fp_[i] = v[c + i];
    out.fn_[i] = v[2 * c + i];
  }
  return out;
}

ClassScores ConfusionCounts::scores(int c) const {
  const double tp = double(true_positives(c)), fp = double(false_positives(c)), fn = double(false_negatives(c));
  ClassScores s;
  s.dice = ratio(2 * tp, 2 * tp + fp + fn);
  s.iou = ratio(tp, tp + fp + fn);
  s.precision = ratio(tp, tp + fp);
  s.recall = ratio(tp, tp + fn);
  s.truth_pixels = true_positives(c) + false_negatives(c);
  s.predicted_pixels = true_positives(c) + false_positives(c);
  return s;
}

}  // namespace tessera
