#pragma once
// The process's place in a job, and the world communicator.
//
// A process counts as launched by MPI when one of the launchers' variables is set
// (mpirun/mpiexec of Open MPI: OMPI_COMM_WORLD_SIZE; MPICH/Hydra and Cray: PMI_SIZE;
// PMIx launchers: PMIX_RANK; Slurm srun: SLURM_NTASKS > 1 with SLURM_PROCID; IBM jsrun:
// JSM_NAMESPACE_SIZE). Then world() initialises MPI (thread level FUNNELED: only the
// calling thread talks to MPI) and finalises it at exit; otherwise world() is a one-rank
// group and MPI is never started, so a plain `tessera train` starts instantly.
//
// Device selection: one rank per device. The local rank comes from MPI's shared-memory
// split when MPI runs, else from OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, PMI_LOCAL_RANK,
// SLURM_LOCALID or JSM_NAMESPACE_LOCAL_RANK; a rank uses CUDA device local_rank % devices.
// Without CUDA every rank uses the CPU with cores / local_size threads (configure_threads).
#include <memory>
#include <string>

#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {

struct LaunchInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string host;
  std::string launcher;  ///< "none", "mpi"
};

/// Whether a launcher variable says this process is one rank of an MPI job.
bool launched_by_mpi();

/// The world group: MPI when launched by MPI or when `force_mpi` (a singleton MPI job),
/// else one rank. Created once; later calls return the same object.
Communicator& world(bool force_mpi = false);
/// Rank, size and local rank of this process (initialises the world if needed).
LaunchInfo launch_info();

/// CUDA device index for this rank: local_rank % device_count, or -1 for the CPU.
int select_device(const LaunchInfo& info, int device_count);

/// Prints "tessera: error: rank N: message" (without the rank when alone) and ends the whole
/// job with exit code `code` (MPI_Abort when MPI runs with more than one rank), so no rank
/// waits forever for one that failed. Never returns.
[[noreturn]] void abort_job(const std::string& message, int code = 1);

}  // namespace tessera::parallel
