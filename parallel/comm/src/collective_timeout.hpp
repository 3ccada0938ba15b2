#pragma once
// Internal: how long a blocking call of any backend (MPI, NCCL) may wait.

namespace tessera::parallel {

/// Seconds a blocking call may wait (TESSERA_COLLECTIVE_TIMEOUT, default 300). Past it the
/// call throws an error naming the ranks it waited for: the peer of a send or recv, or for a
/// collective the ranks that never entered it (each communicator keeps an arrival board).
double collective_timeout_seconds();

}  // namespace tessera::parallel
