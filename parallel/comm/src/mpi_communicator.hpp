#pragma once
// Internal: the MPI backend. Only files of parallel/src include <mpi.h>.
#include <memory>

#include <mpi.h>

#include "collective_timeout.hpp"
#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {

/// Wraps `comm`; with `owns` the communicator is freed on destruction.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm, bool owns);

}  // namespace tessera::parallel
