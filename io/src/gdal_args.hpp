#pragma once
// Numbers as GDAL utilities' arguments (gdalbuildvrt, gdalwarp), once for all of io.
#include <cstdio>
#include <string>

namespace tessera::io::detail {

/// Exact decimal text of a double (std::to_string keeps 6 decimals: degrees lose the grid).
inline std::string exact_decimal(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

}  // namespace tessera::io::detail
