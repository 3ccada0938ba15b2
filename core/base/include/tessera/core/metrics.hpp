#pragma once
// Overlap metrics of a label map against the truth, accumulated over a whole validation set.
// Torch-free (the viewer and `tessera eval` use it). Counts are exact int64 and ADD, so ranks
// can sum as_vector() with an allreduce and rebuild with from_vector().
//
// Per class c, with TP/FP/FN counted pixel by pixel:
//   Dice = 2TP / (2TP + FP + FN)   IoU = TP / (TP + FP + FN)
//   precision = TP / (TP + FP)     recall = TP / (TP + FN)
// A ratio whose denominator is 0 is NaN ("not defined"), never 0 or 1: a class absent from
// both prediction and truth has Dice = IoU = NaN (as nnU-Net v2's evaluation does; MONAI's
// DiceMetric also returns NaN for an empty truth with its default ignore_empty=True), a class
// never predicted has precision NaN, a class absent from the truth has recall NaN (nnU-Net
// v1's convention). Means over classes skip NaN (nanmean), as both tools do.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera {

/// Per-class scores of one ConfusionCounts; NaN where undefined (see above).
struct ClassScores {
  double dice = 0, iou = 0, precision = 0, recall = 0;
  int64_t truth_pixels = 0;      ///< TP + FN
  int64_t predicted_pixels = 0;  ///< TP + FP
};

/// Mean of the finite values (NaN entries skipped); NaN when none is finite.
double nan_mean(const std::vector<double>& values);

/// True positive / false positive / false negative pixel counts per class.
/// Not thread-safe for concurrent add(); give each thread its own and merge().
class ConfusionCounts {
 public:
  explicit ConfusionCounts(int classes = 0);

  /// Counts n pixels of the label arrays `prediction` and `truth` (same layout).
  /// A truth pixel equal to `ignore` (or, for float arrays, not finite) counts nowhere. Any
  /// other truth value must be an integer in [0, classes): tessera::Error otherwise. A
  /// prediction outside [0, classes) (nodata, NaN) is a false negative of the truth class
  /// and a false positive of none.
  template <class T>
  void add(const T* prediction, const T* truth, int64_t n, T ignore);

  /// Adds another set of counts with the same number of classes (tessera::Error otherwise).
  void merge(const ConfusionCounts& other);

  int classes() const { return static_cast<int>(tp_.size()); }
  int64_t true_positives(int c) const { return tp_.at(static_cast<size_t>(c)); }
  int64_t false_positives(int c) const { return fp_.at(static_cast<size_t>(c)); }
  int64_t false_negatives(int c) const { return fn_.at(static_cast<size_t>(c)); }

  /// Flat layout [TP_0..TP_{C−1}, FP_0.., FN_0..]: sum these element-wise across ranks.
  std::vector<int64_t> as_vector() const;
  /// Inverse of as_vector(); tessera::Error when the length is not a multiple of 3.
  static ConfusionCounts from_vector(const std::vector<int64_t>& v);

  ClassScores scores(int c) const;

 private:
  std::vector<int64_t> tp_, fp_, fn_;
};

extern template void ConfusionCounts::add<uint8_t>(const uint8_t*, const uint8_t*, int64_t, uint8_t);
extern template void ConfusionCounts::add<uint16_t>(const uint16_t*, const uint16_t*, int64_t, uint16_t);
extern template void ConfusionCounts::add<int32_t>(const int32_t*, const int32_t*, int64_t, int32_t);
extern template void ConfusionCounts::add<int64_t>(const int64_t*, const int64_t*, int64_t, int64_t);
extern template void ConfusionCounts::add<float>(const float*, const float*, int64_t, float);

}  // namespace tessera
