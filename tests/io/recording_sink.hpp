#pragma once
// A LabelSink that records what reaches it: to see when a wrapping sink (resampling, the
// largest-component reduction) passes labels on, and what.
#include <cstdint>
#include <vector>

#include "tessera/core/image_source.hpp"

namespace tessera::io::test_sinks {

class RecordingSink final : public LabelSink {
 public:
  void write(const Box& box, const Block<uint8_t>& labels) override { boxes.push_back(box), last = labels; }
  void commit() override { committed = true; }
  std::vector<Box> boxes;
  Block<uint8_t> last;
  bool committed = false;
};

}  // namespace tessera::io::test_sinks
