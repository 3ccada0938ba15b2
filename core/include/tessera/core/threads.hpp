#pragma once
// Intra-op threads for LibTorch. Debian's LibTorch starts with one thread; Tessera uses the
// cores this process may use divided by the ranks sharing the node (OMPI/PMI/SLURM/JSM
// local-size variables), unless TESSERA_THREADS or an explicit count says otherwise.
namespace tessera {

/// Sets LibTorch's intra-op threads; `requested` <= 0 means automatic. Returns the count.
int configure_threads(int requested = 0);

}  // namespace tessera
