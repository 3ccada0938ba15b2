#pragma once
// Internal to the engine: validate() helpers that make a parser's complaint name the flag.
#include <string>

#include "tessera/core/error.hpp"

namespace tessera::engine {

/// Runs `parse` (which throws tessera::Error for bad text); a message that does not name
/// `flag` gets it in place of its own "key: " prefix ("schedule: 'x' is not one of …" →
/// "--schedule: 'x' is not one of …").
template <class Parse>
void check_flag(const std::string& flag, Parse&& parse) {
  try {
    parse();
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.find(flag) != std::string::npos) throw;
    const size_t colon = message.find(": ");
    throw Error(flag + ": " + (colon == std::string::npos ? message : message.substr(colon + 2)));
  }
}

}  // namespace tessera::engine
