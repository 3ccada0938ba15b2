// tessera bench allreduce: allreduce bandwidth of the chosen backend over all ranks, message
// sizes 4 KiB … 64 MiB, in the convention of nccl-tests: algorithm bandwidth = bytes / time,
// bus bandwidth = algbw · 2(P−1)/P (what each link carries in a ring; comparable across P).
// Time per size is the slowest rank's mean over the iterations. Run under mpirun:
//   mpirun -np 4 tessera bench allreduce
#include <chrono>
#include <cstdio>

#include <torch/torch.h>

#include "bench_allreduce_options.hpp"
#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/parallel/comm/runtime.hpp"

namespace tessera::bench {

void BenchAllreduceOptions::validate() const {
  if (min_bytes < 4 || max_bytes < min_bytes) throw Error("--min-bytes/--max-bytes: need 4 <= min <= max");
  if (backend != "mpi" && backend != "nccl")
    throw Error("--backend '" + backend + "': choose mpi or nccl (compiled: " + parallel::compiled_backends() + ")");
  if (!(seconds > 0)) throw Error("--seconds: must be > 0, got " + std::to_string(seconds));
}

void run_bench_allreduce(const BenchAllreduceOptions& f) {
  f.validate();
  parallel::Communicator& world = parallel::world(/*force_mpi=*/true);
  std::unique_ptr<parallel::Communicator> nccl;
  parallel::Communicator* comm = &world;
  if (f.backend == "nccl") {
    if (!torch::cuda::is_available()) throw Error("--backend nccl: no CUDA device in this process");
    const int device = parallel::select_device(parallel::launch_info(), int(torch::cuda::device_count()));
    nccl = parallel::make_nccl_communicator(world, device);
    comm = nccl.get();
  }
  const int p = comm->size();
  const bool root = comm->rank() == 0;
  const auto device = f.backend == "nccl" ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (root)
    std::printf("allreduce (sum, float32), backend %s, %d ranks\n%12s %8s %12s %14s %14s\n", f.backend.c_str(), p, "bytes",
                "iters", "time_us", "algbw_GB/s", "busbw_GB/s");
  for (int64_t bytes = f.min_bytes; bytes <= f.max_bytes; bytes *= 2) {
    torch::Tensor t = torch::ones({bytes / 4}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    for (int i = 0; i < 2; ++i) comm->allreduce(t, parallel::ReduceOp::kSum);  // warm-up
    // Iterations from a timed probe, agreed on by all ranks (the slowest decides).
    auto t0 = std::chrono::steady_clock::now();
    comm->allreduce(t, parallel::ReduceOp::kSum);
    torch::Tensor probe = torch::tensor({std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
                                        torch::kDouble);
    world.allreduce(probe, parallel::ReduceOp::kMax);
    const int iters = int(std::clamp(f.seconds / std::max(probe.item<double>(), 1e-7), 3.0, 1000.0));
    world.barrier();
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) comm->allreduce(t, parallel::ReduceOp::kSum);
    torch::Tensor elapsed = torch::tensor({std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters},
                                          torch::kDouble);
    world.allreduce(elapsed, parallel::ReduceOp::kMax);
    const double s = elapsed.item<double>();
    const double algbw = double(bytes) / s / 1e9, busbw = algbw * 2.0 * (p - 1) / p;
    if (root) std::printf("%12lld %8d %12.1f %14.3f %14.3f\n", (long long)bytes, iters, s * 1e6, algbw, busbw);
  }
}

}  // namespace tessera::bench
