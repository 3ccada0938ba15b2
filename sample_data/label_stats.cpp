#include "label_stats.hpp"

#include <fmt/format.h>

namespace tessera::sample {

std::vector<double> class_fractions(const std::vector<uint8_t>& labels, const Index& extent,
                                    const Index& origin, const Index& size, size_t classes) {
  std::vector<int64_t> counts(classes, 0);
  const size_t dims = extent.size();
  int64_t total = 1;
  for (int64_t s : size) total *= s;
  // Walk the box with an odometer over all axes but the last.
  Index at(dims, 0);
  for (int64_t done = 0; done < total; done += size[dims - 1]) {
    int64_t offset = 0;
    for (size_t d = 0; d < dims; ++d) offset = offset * extent[d] + origin[d] + at[d];
    for (int64_t i = 0; i < size[dims - 1]; ++i) {
      const uint8_t c = labels[size_t(offset + i)];
      if (c < classes) ++counts[c];
    }
    for (size_t d = dims - 1; d-- > 0;) {
      if (++at[d] < size[d]) break;
      at[d] = 0;
    }
  }
  std::vector<double> fractions(classes, 0.0);
  for (size_t c = 0; c < classes; ++c)
    fractions[c] = total > 0 ? double(counts[c]) / double(total) : 0.0;
  return fractions;
}

std::string format_fractions(const std::vector<std::string>& names,
                             const std::vector<double>& fractions) {
  std::string out;
  for (size_t c = 0; c < fractions.size(); ++c)
    out += fmt::format("{}{} {:.1f}%", c ? " " : "", names[c], 100.0 * fractions[c]);
  return out;
}

}  // namespace tessera::sample
