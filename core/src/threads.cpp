#include "tessera/core/threads.hpp"

#include <sched.h>

#include <cstdlib>
#include <string>
#include <thread>

#include <ATen/Parallel.h>

namespace tessera {
namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  try {
    return std::stoi(v);
  } catch (...) {
    return 0;
  }
}

int local_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE",
                           "SLURM_NTASKS_PER_NODE", "JSM_NAMESPACE_LOCAL_SIZE"}) {
    if (int n = env_int(name); n > 0) return n;
  }
  return 1;
}

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

int configure_threads(int requested) {
  int n = requested > 0 ? requested : env_int("TESSERA_THREADS");
  if (n <= 0) {
    // A launcher that binds ranks to cores already divided them; otherwise share the node.
    const int cores = usable_cores();
    const bool bound = cores < static_cast<int>(std::thread::hardware_concurrency());
    n = bound ? cores : cores / local_ranks();
  }
  if (n < 1) n = 1;
  at::set_num_threads(n);
  return n;
}

}  // namespace tessera
