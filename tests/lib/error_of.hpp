#pragma once
// For tests of refusals: the message a tessera::Error carries, to check what it names.
#include <functional>
#include <string>

#include "tessera/core/error.hpp"

namespace tessera::test {

/// The message of the tessera::Error `f` throws, or "(no tessera::Error thrown)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no tessera::Error thrown)";
}

}  // namespace tessera::test
