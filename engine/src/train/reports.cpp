#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "train_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/parallel/modes/pipeline.hpp"
#include "tessera/parallel/plan/grid_plan.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera::engine::train {

int64_t predicted_rank_bytes(const RunConfig& c, const parallel::ProcessGrid& grid, int64_t baseline) {
  const UNetOptions& model = c.model.options;
  if (!model.is_builtin()) return 0;
  const int64_t side = c.train.tile + unet_remainder(model) + (model.padding == Padding::kValid ? 2 * unet_halo(model) : 0);
  const parallel::GridShape& shape = grid.shape();
  parallel::PlanOptions o(model, Index(size_t(model.dims), side), grid.world().size(), int64_t{1} << 40);
  o.with_baseline_bytes(baseline)
      .with_schedule(shape.pipeline > 1 ? parse_pipeline_schedule(c.parallel.schedule) : PipelineScheduleKind::kGPipe)
      .with_checkpoint(parse_activation_checkpoint(c.parallel.activation_checkpoint));
  // One stage holds the whole batch at once (GPipe over its tiles); a pipeline one tile per micro-batch.
  const std::vector<int> mesh = shape.spatial > 1 ? spatial_mesh(c.parallel, shape.spatial, model.dims).parts : std::vector<int>{};
  try {
    return parallel::layout_rank_bytes(o, unet_layer_sequence(model, side), 1, shape.pipeline, mesh, c.train.batch);
  } catch (const Error&) {
    return 0;  // a layout the planner does not split this way: the run says so by its own checks
  }
}

// Rank 0 prints each rank's peak memory (its device's memory in use on a GPU; on CPU ranks,
// which share the host, the rank's own resident set) and mean utilisation.

void print_telemetry_summary(parallel::Communicator& world, const parallel::DeviceMonitor& monitor, int64_t predicted) {
  const parallel::DeviceSummary s = monitor.summary();
  const bool cpu = s.device == "cpu";
  // On CPU the kernel's own peak (VmHWM): the samples, a second apart, miss a step's peak.
  const double peak = double(cpu ? std::max(s.peak_process_rss_bytes, peak_resident_bytes()) : s.peak_mem_used_bytes);
  torch::Tensor mine = torch::tensor({peak, s.mean_util_pct, double(cpu ? predicted : 0)}, torch::kDouble);
  torch::Tensor all = world.allgather(mine);
  if (world.rank() != 0) return;
  for (int r = 0; r < world.size(); ++r) {
    const double p = all[r][0].item<double>(), guess = all[r][2].item<double>(), mib = 1 << 20;
    const std::string against =
        guess > 0 ? fmt::format(" (planner {:.1f} MiB, {:+.1f} %)", guess / mib, 100 * (guess - p) / p) : std::string();
    std::fprintf(stderr, "telemetry: rank %d %s peak %s %.1f MiB%s, mean utilisation %.0f%%\n", r, s.device.c_str(),
                 cpu ? "resident memory" : "memory", p / mib, against.c_str(), all[r][1].item<double>());
  }
}

// ", spatial 2 × 2 (blocks of 24 × 24 px)": the blocks of a train.tile tile with --sp
// ("16–24" along an axis whose blocks differ); empty without.
namespace {

std::string describe_blocks(const RunConfig& c, const parallel::SpatialDecomposition* spatial) {
  if (!spatial) return "";
  const UNetOptions& model = c.model.options;
  const SpatialMesh& mesh = spatial->mesh();
  std::string blocks;
  for (int a = 0; a < mesh.dims(); ++a) {
    const std::vector<int64_t> at = block_offsets(c.train.tile + unet_remainder(model), mesh.parts[size_t(a)],
                                                            unet_alignment(model), "train.tile");
    int64_t lo = at.back(), hi = 0;
    for (size_t i = 1; i < at.size(); ++i) {
      lo = std::min(lo, at[i] - at[i - 1]);
      hi = std::max(hi, at[i] - at[i - 1]);
    }
    blocks += (a ? " × " : "") + std::to_string(lo) + (lo == hi ? "" : "–" + std::to_string(hi));
  }
  return ", spatial " + mesh.describe() + " (blocks of " + blocks + (model.dims == 3 ? " voxels)" : " px)");
}

}  // namespace

void print_plan(const RunConfig& c, const parallel::ProcessGrid& grid, const Hooks& hooks, int threads, UNet& net) {
  const UNetOptions& model = c.model.options;
  const TrainOptions& t = c.train;
  int64_t parameters = 0;
  for (const auto& p : net->parameters()) parameters += p.numel();
  const std::string name = model.is_builtin() ? "U-Net" : model.name;
  std::fprintf(stderr, "train: %d-D %s L=%d f=%d, %lld parameters, halo %lld, tiles %lld+%lld (input %lld), %d threads, %s%s, global batch %lld\n",
               model.dims, name.c_str(), model.levels, model.base_filters, (long long)parameters,
               (long long)unet_halo(model), (long long)t.tile, (long long)unet_remainder(model),
               (long long)(t.tile + unet_remainder(model) + (model.padding == Padding::kValid ? 2 * unet_halo(model) : 0)),
               threads, grid.describe().c_str(),
               describe_blocks(c, hooks.spatial    ? &hooks.spatial->decomposition()
                                  : hooks.pipeline ? hooks.pipeline->decomposition()
                                                   : nullptr)
                   .c_str(), (long long)t.batch * grid.shape().data);
}

std::unique_ptr<parallel::DeviceMonitor> start_monitor(const TrainOptions& t, const Hooks& hooks) {
  auto monitor = std::make_unique<parallel::DeviceMonitor>(parallel::DeviceMonitorOptions::for_this_rank(t.run_dir));
  monitor->set_phase("train");
  hooks.set_step_callback([m = monitor.get(), batch = t.batch, pipeline = hooks.pipeline](int64_t step, double) {
    m->set_step(step);
    m->set_tiles_done(step * batch);
    if (pipeline && pipeline->last_step()) {
      const parallel::PipelineStepStats& st = *pipeline->last_step();
      m->set_pipeline_stage({pipeline->stage_index(), st.seconds, st.compute_seconds, st.bytes_sent, st.bytes_received,
                             peak_resident_bytes()});
    }
  });
  return monitor;
}

// "data parallel: 3 buckets per step, 2 posted during the backward; communication 1.9 ms per
// step, 84% of it during the backward, 0.4 ms waited after it" (rank 0's view).
void print_communication(const parallel::DataParallelHooks& h) {
  const parallel::CommunicationTimeline& t = h.timeline();
  if (h.replicas() < 2 || h.buckets_reduced() == 0) return;
  const double steps = double(std::max<int64_t>(1, t.steps));
  if (t.steps == 0) {
    std::printf("data parallel: %lld gradient buckets reduced after the backward (overlap off)\n",
                (long long)h.buckets_reduced());
    return;
  }
  const std::string wire = h.compression() == Precision::kFp32
                               ? ""
                               : " (gradients sent in " + to_string(h.compression()) + ", error feedback)";
  std::printf("data parallel: %.1f buckets per step, %.1f posted during the backward; communication %.2f ms per step, "
              "%.0f%% of it during the backward, %.2f ms waited after it%s\n",
              double(h.buckets_reduced()) / steps, double(h.buckets_overlapped()) / steps, 1e3 * t.busy_seconds / steps,
              100 * t.hidden_share(), 1e3 * t.exposed_seconds / steps, wire.c_str());
}

void print_halo_exchange(const parallel::SpatialTrainHooks& h, int64_t steps) {
  const parallel::SpatialDecomposition& d = h.decomposition();
  std::printf("halo exchange: rank 0 sent %.2f MiB per step (forward %.2f, backward %.2f)\n",
              double(d.halo_bytes_forward() + d.halo_bytes_backward()) / steps / (1 << 20),
              double(d.halo_bytes_forward()) / steps / (1 << 20), double(d.halo_bytes_backward()) / steps / (1 << 20));
}

void print_report(const TrainReport& r) {
  std::printf("trained %lld steps in %.1f s (%.1f tiles/s), final loss %.4f%s\ncheckpoint: %s\n", (long long)r.steps,
              r.seconds, r.tiles_per_second, r.final_loss, r.stopped_early ? " (stopped early)" : "",
              r.checkpoint.c_str());
  if (r.best_validation >= 0)
    std::printf("best validation mean Dice %.4f: %s\n", r.best_validation, r.best_checkpoint.c_str());
}

}  // namespace tessera::engine::train
