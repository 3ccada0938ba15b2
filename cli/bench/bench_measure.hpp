#pragma once
// What the training benches measure on every rank alike (bench pipeline, spatial, dsn):
// a rank's figure gathered on every rank, and the bytes of a trainer's kept state.
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::bench {

/// Every rank's `mine`, indexed by rank, on every rank of `comm` (collective).
std::vector<int64_t> per_rank(parallel::Communicator& comm, int64_t mine);

/// Bytes of the tensors a trainer keeps between steps: `parameters`, their gradients and
/// Adam's moments.
int64_t training_state_bytes(const std::vector<torch::Tensor>& parameters, torch::optim::Adam& adam);

/// Ends a PeakMemoryMeter's fixed mmap threshold for the work that follows a measurement
/// (timed steps): buffers below 32 MiB, the ceiling of glibc's own dynamic threshold on
/// 64-bit, come from the heap again and are reused instead of faulted in anew.
void restore_mmap_threshold();

}  // namespace tessera::bench
