#include "tessera/core/precision.hpp"

#include "tessera/core/error.hpp"

namespace tessera {

std::string to_string(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::kFp32;
  if (s == "fp16") return Precision::kFp16;
  if (s == "bf16") return Precision::kBf16;
  throw Error("--precision must be fp32, fp16 or bf16, got '" + s + "'");
}

}  // namespace tessera
