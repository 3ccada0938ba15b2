#pragma once
// GDAL's last error message, once for all of io (and the tools that build on it).
#include <cpl_error.h>

#include <string>

namespace tessera::io::detail {

/// GDAL's last message on one line (user errors are one line), or `fallback` when GDAL has none.
inline std::string gdal_error(const std::string& fallback = "GDAL error") {
  const char* msg = CPLGetLastErrorMsg();
  std::string text = (msg && *msg) ? std::string(msg) : fallback;
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

}  // namespace tessera::io::detail
