#pragma once
// "Keep the largest connected component" of a class, nnU-Net's post-processing, with ITK's
// ConnectedComponentImageFilter (face connectivity) and RelabelComponentImageFilter (components
// by size, largest first). ITK types stay in io/src. Thread safety: the function is reentrant;
// a LargestComponentSink is not shared.
#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/core/image_source.hpp"

namespace tessera::io {

/// In `labels` (z, y, x, x fastest, of `extent`), every voxel of class `label` outside that
/// class's largest face-connected component becomes `background`; returns how many did. A
/// class absent or in one piece is left as it is. Programmer error (abort) unless labels holds
/// extent's voxel count. Throws tessera::Error when ITK cannot label (out of memory).
int64_t keep_largest_component(std::vector<uint8_t>& labels, const Index& extent, uint8_t label,
                               uint8_t background = 0);

/// A LabelSink for a whole volume (z, y, x) that keeps the largest component of each class of
/// `keep_largest` (keep_largest_component, background 0) before passing the labels on: windows
/// kept in memory (one byte per voxel; unwritten voxels are 0), on commit() the classes
/// reduced in turn, the volume written into `inner` as one window, `inner` committed. Without
/// commit() nothing reaches `inner`. Not thread-safe: one writer.
class LargestComponentSink final : public LabelSink {
 public:
  LargestComponentSink(std::unique_ptr<LabelSink> inner, Index extent, std::vector<int> keep_largest);
  /// Box inside the extent, labels shape (1, box.size...); else programmer error.
  void write(const Box& box, const Block<uint8_t>& labels) override;
  void commit() override;

 private:
  std::unique_ptr<LabelSink> inner_;
  Index extent_;
  std::vector<int> keep_largest_;
  std::vector<uint8_t> labels_;
  bool committed_ = false;
};

}  // namespace tessera::io
