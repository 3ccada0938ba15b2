#pragma once
// A floating-point format, one concept: the simulator's compute precision (parallel/plan's
// cluster.hpp device peaks) and the format gradients travel in (parallel/comm's
// PackedAllreduce, parallel/modes' data-parallel compression). Torch-free.
#include <string>

namespace tessera {

enum class Precision { kFp32, kFp16, kBf16 };
std::string to_string(Precision p);               ///< fp32, fp16, bf16
Precision parse_precision(const std::string& s);  ///< throws tessera::Error naming --precision

}  // namespace tessera
