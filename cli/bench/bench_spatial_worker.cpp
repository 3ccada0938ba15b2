// tessera bench spatial's worker: one layout of spatial parallelism (parallel/modes/spatial.hpp)
// under mpirun, each rank holding one block of the tile: its measured memory, step time and
// halo bytes, or the largest side within --memory-cap. See bench_spatial.cpp for the figures.
#include "bench_spatial_worker.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include <torch/torch.h>

#include "bench_common.hpp"
#include "bench_measure.hpp"
#include "bench_pipeline.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/losses.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/parallel/comm/process_grid.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/parallel/modes/spatial.hpp"
#include "tessera/parallel/modes/spatial_hooks.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera::bench {
namespace {

using pipeline_bench::Batch;
using pipeline_bench::make_batch;

// One rank's model and, with more than one rank, its spatial hooks (SpatialTrainHooks: the
// U-Net on this rank's block under a DecompositionScope, gradients summed over the blocks).
class Worker {
 public:
  Worker(const UNetOptions& o, parallel::ProcessGrid& grid, const SpatialMesh& mesh) : net_(o), grid_(grid) {
    if (grid.shape().spatial > 1) {
      hooks_ = std::make_unique<parallel::SpatialTrainHooks>(grid.spatial(), grid.data(), mesh);
      hooks_->on_start(net_);
    }
  }

  // Forward, backward, gradient sum and Adam; gradients zeroed in place (no reallocation).
  void step(const Batch& b, torch::optim::Adam& adam) {
    for (auto& p : net_->parameters())
      if (p.grad().defined()) p.mutable_grad().zero_();
    if (hooks_) {
      hooks_->forward_backward(net_, b.input, b.target, loss_, 1.0);
      hooks_->on_gradients(net_);
    } else {
      segmentation_loss(net_->forward(b.input), b.target, loss_).backward();
    }
    adam.step();
  }

  int64_t halo_bytes() const {
    return hooks_ ? hooks_->decomposition().halo_bytes_forward() + hooks_->decomposition().halo_bytes_backward() : 0;
  }

  struct Peak {
    int64_t state = 0, step = 0, halo = 0;  // this rank's
  };
  // A fresh optimiser, one step (gradients and moments allocated, kernels set up), then the
  // measured steady step.
  Peak measure(const Batch& b) {
    const PeakMemoryMeter first;  // as bench pipeline: malloc's mmap threshold fixed before the first step
    torch::optim::Adam adam(net_->parameters(), torch::optim::AdamOptions(1e-4));
    grid_.world().barrier();
    step(b, adam);
    Peak p;
    p.state = training_state_bytes(net_->parameters(), adam);
    const int64_t halo_before = halo_bytes();
    const PeakMemoryMeter steady;
    step(b, adam);
    p.step = steady.peak_increase();
    p.halo = halo_bytes() - halo_before;
    return p;
  }

  // Median over `steps` steps (after one warm-up) of the slowest rank's seconds.
  double step_seconds(const Batch& b, int steps) {
    torch::optim::Adam adam(net_->parameters(), torch::optim::AdamOptions(1e-4));
    std::vector<double> seconds;
    for (int i = 0; i <= steps; ++i) {
      grid_.world().barrier();
      const auto t0 = std::chrono::steady_clock::now();
      step(b, adam);
      torch::Tensor t = torch::tensor({std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
                                      torch::kDouble);
      grid_.world().allreduce(t, parallel::ReduceOp::kMax);
      if (i > 0) seconds.push_back(t.item<double>());
    }
    return median_of(seconds);
  }

 private:
  UNet net_;
  parallel::ProcessGrid& grid_;
  std::unique_ptr<parallel::SpatialTrainHooks> hooks_;
  LossOptions loss_;
};

}  // namespace

int64_t predicted_peak(const UNetOptions& o, int64_t side, const std::vector<int>& parts, int batch) {
  const LayerSequence seq = unet_layer_sequence(o, side);
  const parallel::SpatialPlan plan = parallel::spatial_plan(seq, parts, parallel::SpatialPlanOptions().with_micro_batch(batch));
  if (std::all_of(parts.begin(), parts.end(), [](int p) { return p == 1; })) {
    const int64_t one = stage_bytes(seq, 0, seq.size() - 1, 1, StageMemoryOptions{});
    return plan.state_bytes + (one - plan.state_bytes) * batch;
  }
  return plan.bytes;
}

namespace {

nlohmann::json worker_measure(const BenchSpatialOptions& f, const UNetOptions& o, parallel::ProcessGrid& grid,
                              const SpatialMesh& mesh) {
  parallel::Communicator& world = grid.world();
  torch::manual_seed(0);
  Worker w(o, grid, mesh);
  const Batch b = make_batch(o, f.batch, f.side);
  // Memory first: its meter fixes glibc's mmap threshold before any step, so the step's freed
  // buffers go back to the system. Timed steps first would leave the heap full of free chunks
  // (glibc's dynamic threshold serves buffers up to 32 MiB from it), which the measured step
  // then reuses at scattered addresses and keeps resident: 123 MiB above the step's tensors at
  // side 512 (docs/measured-results.md). Then the timing, with the heap reused again.
  const Worker::Peak p = w.measure(b);
  restore_mmap_threshold();
  const double seconds = w.step_seconds(b, f.steps);
  return {{"ranks", world.size()},
          {"mesh", mesh.parts},
          {"state_bytes", per_rank(world, p.state)},
          {"step_bytes", per_rank(world, p.step)},
          {"halo_bytes", per_rank(world, p.halo)},
          {"step_seconds", seconds}};
}

// The largest side (a multiple of the alignment, ≥ one alignment unit per block) whose measured
// peak fits `cap` bytes on every rank, searched from the planner's prediction.
nlohmann::json worker_cap(const BenchSpatialOptions& f, const UNetOptions& o, parallel::ProcessGrid& grid,
                          const SpatialMesh& mesh, int64_t cap) {
  const int64_t a = unet_alignment(o);
  const int64_t first = a * *std::max_element(mesh.parts.begin(), mesh.parts.end());
  const int64_t j_max = (f.max_side - first) / a;
  if (j_max < 0) throw Error("--max-side: below the smallest side the split accepts (" + std::to_string(first) + ")");
  auto side_of = [&](int64_t j) { return first + j * a; };
  int64_t predicted = 0;
  for (int64_t j = 0; j <= j_max && predicted_peak(o, side_of(j), mesh.parts, f.batch) <= cap; ++j) predicted = side_of(j);
  torch::manual_seed(0);
  Worker w(o, grid, mesh);
  int64_t side = 0, peak = 0, over_side = 0, over_peak = 0;
  int probes = 0;
  auto fits = [&](int64_t j) {
    torch::manual_seed(1);
    const Batch b = make_batch(o, f.batch, side_of(j));
    const Worker::Peak p = w.measure(b);
    torch::Tensor most = torch::tensor({p.state + p.step}, torch::kInt64);
    grid.world().allreduce(most, parallel::ReduceOp::kMax);
    const int64_t m = most.item<int64_t>();
    ++probes;
    if (grid.world().rank() == 0)
      std::fprintf(stderr, "  P = %d: side %lld peak %.1f MiB (%s)\n", grid.world().size(), (long long)side_of(j), mib(m),
                   m <= cap ? "fits" : "over");
    if (m <= cap && side_of(j) > side) std::tie(side, peak) = std::pair(side_of(j), m);
    if (m > cap && (over_side == 0 || side_of(j) < over_side)) std::tie(over_side, over_peak) = std::pair(side_of(j), m);
    return m <= cap;
  };
  largest_fitting(predicted ? (predicted - first) / a : 0, j_max, fits);
  return {{"ranks", grid.world().size()}, {"mesh", mesh.parts},       {"side", side},
          {"peak_bytes", peak},           {"over_side", over_side},   {"over_peak_bytes", over_peak},
          {"predicted_side", predicted},  {"probes", probes}};
}

}  // namespace

void run_spatial_worker(const BenchSpatialOptions& f) {
  const UNetOptions& o = f.model;
  parallel::Communicator& world = parallel::world();
  const auto mesh = SpatialMesh::parse(f.worker_mesh, o.dims, "--worker-mesh");
  if (mesh.size() != world.size())
    throw Error("--worker-mesh " + f.worker_mesh + ": " + std::to_string(mesh.size()) + " blocks for " +
                std::to_string(world.size()) + " ranks");
  parallel::ProcessGrid grid(world, parallel::GridShape().with_spatial(world.size()));
  configure_threads(f.threads);
  const nlohmann::json out = f.worker == "measure"  // else "cap", with --memory-cap (validate())
                                 ? worker_measure(f, o, grid, mesh)
                                 : worker_cap(f, o, grid, mesh, int64_t(f.memory_cap * double(1 << 20)));
  if (world.rank() == 0) std::cout << out.dump() << std::endl;
}

}  // namespace tessera::bench
