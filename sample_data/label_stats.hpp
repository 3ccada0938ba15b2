#pragma once
// Class fractions of a dense label array, for the one-line summaries the tool prints.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/geometry.hpp"

namespace tessera::sample {

/// Fraction of each class 0 … names.size()−1 among the labels inside the box
/// [origin, origin + size) of a dense row-major array with `extent` (any number of axes,
/// last axis fastest). Labels outside the class range are not counted.
std::vector<double> class_fractions(const std::vector<uint8_t>& labels, const Index& extent,
                                    const Index& origin, const Index& size, size_t classes);

/// "vegetation 52.1% building 18.0% …"
std::string format_fractions(const std::vector<std::string>& names,
                             const std::vector<double>& fractions);

}  // namespace tessera::sample
