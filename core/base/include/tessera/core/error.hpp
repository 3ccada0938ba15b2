#pragma once
// The one error type for expected failures: bad files, bad options, a failed rank.
// The message names the file or field (and, in parallel code, the rank); callers print it
// as one line and exit non-zero. Programmer errors use TESSERA_CHECK and abort loudly.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tessera {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tessera

#define TESSERA_CHECK(cond)                                                              \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: internal check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
