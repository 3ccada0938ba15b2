#pragma once
// A floating-point format, one concept for the parallel layer: the simulator's compute
// precision (cluster.hpp's device peaks) and the format gradients travel in
// (communicator.hpp's PackedAllreduce, data_parallel.hpp's compression). Torch-free.
#include <string>

namespace tessera::parallel {

enum class Precision { kFp32, kFp16, kBf16 };
std::string to_string(Precision p);               ///< fp32, fp16, bf16
Precision parse_precision(const std::string& s);  ///< throws tessera::Error naming --precision

}  // namespace tessera::parallel
