#pragma once
// Internal: the MPI backend. Only files of parallel/src include <mpi.h>.
#include <memory>

#include <mpi.h>

#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {

/// Wraps `comm`; with `owns` the communicator is freed on destruction.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, bool owns);

/// Seconds a blocking call may wait (TESSERA_COLLECTIVE_TIMEOUT, default 300). Past it the
/// call throws an error naming the ranks it waited for: the peer of a send or recv, or for a
/// collective the ranks that never entered it (each communicator keeps an arrival board).
double collective_timeout_seconds();

}  // namespace tessera::parallel
