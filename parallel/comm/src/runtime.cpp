#include "tessera/parallel/comm/runtime.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "mpi_communicator.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/fault_injection.hpp"

namespace tessera::parallel {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  try {
    return std::stoi(v);
  } catch (...) {
    return fallback;
  }
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

struct World {
  std::unique_ptr<Communicator> comm;
  LaunchInfo info;
  bool mpi = false;
};

World& state() {
  static World w;
  return w;
}

void finalize_mpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  state().comm.reset();  // free communicators before MPI goes away
  MPI_Finalize();
}

void start(bool force_mpi) {
  World& w = state();
  w.info.host = host_name();
  if (!force_mpi && !launched_by_mpi()) {
    w.comm = make_self_communicator();
    w.info.launcher = "none";
    return;
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw Error("mpi: MPI_Init_thread failed");
    std::atexit(finalize_mpi);
  }
  // Errors come back as codes and become tessera::Error; abort_job ends the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  w.mpi = true;
  w.info.launcher = "mpi";
  w.comm = make_mpi_communicator(MPI_COMM_WORLD, false);
  w.info.rank = w.comm->rank();
  w.info.size = w.comm->size();
  set_fault_rank(w.info.rank);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.info.rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &w.info.local_rank);
  MPI_Comm_size(node, &w.info.local_size);
  MPI_Comm_free(&node);
}

}  // namespace

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "JSM_NAMESPACE_SIZE"})
    if (std::getenv(v)) return true;
  return std::getenv("SLURM_PROCID") && env_int("SLURM_NTASKS", 1) > 1;
}

Communicator& world(bool force_mpi) {
  static std::once_flag once;
  std::call_once(once, [&] { start(force_mpi); });
  return *state().comm;
}

LaunchInfo launch_info() {
  world();
  LaunchInfo info = state().info;
  if (!state().mpi) {
    for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "SLURM_LOCALID",
                          "JSM_NAMESPACE_LOCAL_RANK"})
      if (int r = env_int(v, -1); r >= 0) {
        info.local_rank = r;
        break;
      }
  }
  return info;
}

int select_device(const LaunchInfo& info, int device_count) {
  if (device_count <= 0) return -1;
  return info.local_rank % device_count;
}

void abort_job(const std::string& message, int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int rank = 0, size = 1;
  const bool mpi = initialized && !finalized;
  if (mpi) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  } else if (launched_by_mpi()) {  // failed before MPI started: the launcher's variables say who we are
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"})
      if (int r = env_int(v, -1); r >= 0) {
        rank = r;
        break;
      }
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "JSM_NAMESPACE_SIZE"})
      if (int n = env_int(v, 0); n > 0) {
        size = n;
        break;
      }
  }
  const std::string prefix = "rank " + std::to_string(rank) + ": ";
  // Messages from the communicators already name the rank.
  const bool named = message.rfind(prefix, 0) == 0;
  if (size > 1)
    std::fprintf(stderr, "tessera: error: %s%s\n", named ? "" : prefix.c_str(), message.c_str());
  else
    std::fprintf(stderr, "tessera: error: %s\n", message.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  if (mpi && size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // without MPI every rank fails alike, or the launcher ends the others
}

}  // namespace tessera::parallel
