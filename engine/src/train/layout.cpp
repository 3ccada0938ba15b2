#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <torch/torch.h>

#include "train_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/spatial_mesh.hpp"
#include "tessera/parallel/modes/pipeline.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::engine::train {
// The grid the flags ask for: data × pipeline × spatial, every combination runs.
parallel::GridShape grid_shape(const ParallelConfig& p) {
  return parallel::GridShape().with_data(p.dp).with_pipeline(p.pp).with_spatial(p.sp);
}

// The blocks of every tile with --sp S: --sp-mesh, or S blocks along the first axis.
SpatialMesh spatial_mesh(const ParallelConfig& p, int spatial, int dims) {
  if (p.sp_mesh.empty()) return SpatialMesh::along_first_axis(spatial, dims);
  return SpatialMesh::parse(p.sp_mesh, dims);
}

// "2x2": the mesh as --sp-mesh spells it (the resolved config records it).
std::string mesh_text(const SpatialMesh& mesh) {
  std::string s;
  for (int parts : mesh.parts) s += (s.empty() ? "" : "x") + std::to_string(parts);
  return s;
}

// Every tile side of the run, with the key that sets it: train.tile and the curriculum's.
std::vector<std::pair<std::string, int64_t>> tile_sides(const TrainOptions& t) {
  std::vector<std::pair<std::string, int64_t>> sides = {{"train.tile", t.tile}};
  for (size_t i = 0; i < t.curriculum.size(); ++i)
    sides.push_back({"train.curriculum[" + std::to_string(i) + "].tile", t.curriculum[i].tile});
  return sides;
}

// What spatial parallelism refuses: a `valid` model, a mesh that is not --sp blocks or has
// more axes than the model, tiles that do not split into blocks starting on multiples of the
// pooling factor.
void check_spatial(const RunConfig& c, int spatial, const std::string& config) {
  const UNetOptions& model = c.model.options;
  const std::string sp = "--sp " + std::to_string(spatial);
  if (model.padding != Padding::kSame)
    throw Error(config + ": " + sp + ": spatial parallelism needs a `same`-padding U-Net, model.padding is " +
                to_string(model.padding) + " (use --padding same)");
  const SpatialMesh mesh = spatial_mesh(c.parallel, spatial, model.dims);
  if (mesh.size() != spatial)
    throw Error("--sp-mesh " + c.parallel.sp_mesh + ": " + std::to_string(mesh.size()) + " blocks, but " + sp +
                " (the mesh's product must equal --sp)");
  for (const auto& [key, side] : tile_sides(c.train))
    for (int a = 0; a < mesh.dims(); ++a) {
      try {
        block_offsets(side + unet_remainder(model), mesh.parts[size_t(a)], unet_alignment(model),
                                key + " on axis " + std::to_string(a) + " of " + sp + " (mesh " + mesh.describe() + ")");
      } catch (const Error& e) {
        throw Error(config + ": " + e.what());
      }
    }
}

// What the parallel modes refuse, refused before the run starts.
// parallel.gradient_compression → the format gradients travel in: none (or fp32), bf16, fp16.
Precision gradient_wire(const std::string& s) {
  if (s == "none" || s == "fp32") return Precision::kFp32;
  if (s == "bf16" || s == "fp16") return parse_precision(s);
  throw Error("'" + s + "' is not one of none, bf16, fp16");
}

void check_parallel(const RunConfig& c, const parallel::ProcessGrid& grid, const std::string& config) {
  const TrainOptions& t = c.train;
  const UNetOptions& model = c.model.options;
  const int micro_batches = c.parallel.micro_batches;
  if (grid.shape().spatial > 1 || !c.parallel.sp_mesh.empty()) check_spatial(c, grid.shape().spatial, config);
  try {
    gradient_wire(c.parallel.gradient_compression);  // a known format (stages and blocks refuse any: train_settings.hpp)
  } catch (const Error& e) {
    throw Error(config + ": parallel.gradient_compression: " + e.what());
  }
  if (micro_batches < 0 || micro_batches > t.batch)
    throw Error(config + ": parallel.micro_batches: " + std::to_string(micro_batches) + " must be in 0 … batch (" +
                std::to_string(t.batch) + "; 0: one tile per micro-batch)");
  if (grid.shape().pipeline == 1 || c.model.is_dsn()) return;  // a DSN's stages: engine/src/train/dsn.cpp
  const LayerSequence seq = unet_layer_sequence(model, t.tile + unet_remainder(model) + 2 * unet_halo(model));
  if (seq.size() < grid.shape().pipeline)
    throw Error("--pp: " + std::to_string(grid.shape().pipeline) + " stages for a model of " + std::to_string(seq.size()) +
                " layers");
  try {
    parallel::PipelineOptions(parallel::balance_naive(seq.size(), grid.shape().pipeline).sizes)
        .with_micro_batches(std::max(1, micro_batches))
        .with_loss(t.loss)
        .validate(seq);
  } catch (const Error& e) {
    throw Error(config + ": " + e.what() + " (pipeline training, --pp " + std::to_string(grid.shape().pipeline) + ")");
  }
}

// The parallel strategy, built once from the grid: a DSN's domain groups (replicas and
// spatial blocks inside each), else pipeline stages (their tiles split over
// the spatial group when --sp > 1, replicas over the data group), else spatial blocks (and
// replicas), else data parallelism.
Hooks make_hooks(const RunConfig& c, parallel::ProcessGrid& grid, int domains) {
  const ParallelConfig& p = c.parallel;
  Hooks out;
  if (c.model.is_dsn()) {
    auto h = std::make_unique<parallel::DomainTrainHooks>(
        grid, domains, spatial_mesh(p, grid.shape().spatial, c.model.options.dims),
        parallel::DomainHookOptions()
            .with_writes_outputs(grid.is_root())
            .with_schedule(parse_pipeline_schedule(p.schedule))
            .with_checkpoint(parse_activation_checkpoint(p.activation_checkpoint)));
    out.set_step_callback = [dsn = h.get()](auto fn) { dsn->set_step_callback(std::move(fn)); };
    out.domain = h.get();
    out.hooks = std::move(h);
  } else if (grid.shape().pipeline > 1) {
    const auto options = parallel::PipelineHookOptions()
                             .with_micro_batches(p.micro_batches)
                             .with_schedule(parse_pipeline_schedule(p.schedule))
                             .with_checkpoint(parse_activation_checkpoint(p.activation_checkpoint))
                             .with_writes_outputs(grid.is_root());
    auto h = grid.shape().spatial > 1
                 ? std::make_unique<parallel::PipelineTrainHooks>(
                       grid.pipeline(), grid.data(), grid.spatial(),
                       spatial_mesh(p, grid.shape().spatial, c.model.options.dims), options)
                 : std::make_unique<parallel::PipelineTrainHooks>(grid.pipeline(), grid.data(), options);
    out.set_step_callback = [stage = h.get()](auto fn) { stage->set_step_callback(std::move(fn)); };
    out.pipeline = h.get();
    out.hooks = std::move(h);
  } else if (grid.shape().spatial > 1) {
    auto h = std::make_unique<parallel::SpatialTrainHooks>(
        grid.spatial(), grid.data(), spatial_mesh(p, grid.shape().spatial, c.model.options.dims),
        parallel::SpatialHookOptions()
            .with_sync_batch_norm(c.train.sync_batch_norm)
            .with_writes_outputs(grid.is_root()));
    out.set_step_callback = [blocks = h.get()](auto fn) { blocks->set_step_callback(std::move(fn)); };
    out.spatial = h.get();
    out.hooks = std::move(h);
  } else {
    auto h = std::make_unique<parallel::DataParallelHooks>(grid.data(), parallel::DataParallelOptions()
                                                                           .with_fusion_bytes(int64_t(p.fusion_mib * (1 << 20)))
                                                                           .with_overlap(p.overlap_allreduce)
                                                                           .with_compression(gradient_wire(p.gradient_compression))
                                                                           .with_writes_outputs(grid.is_root()));
    out.set_step_callback = [stage = h.get()](auto fn) { stage->set_step_callback(std::move(fn)); };
    out.data = h.get();
    out.hooks = std::move(h);
  }
  return out;
}

// RUN/config.yaml: every field as this run uses it (the grid as resolved), written staged.
void write_resolved_config(RunConfig c, const parallel::ProcessGrid& grid, const std::string& config,
                           const std::string& head) {
  absolute_data_paths(c, config);
  c.parallel.dp = grid.shape().data;
  c.parallel.pp = grid.shape().pipeline;
  c.parallel.sp = grid.shape().spatial;
  if (c.parallel.sp > 1) c.parallel.sp_mesh = mesh_text(spatial_mesh(c.parallel, c.parallel.sp, c.model.options.dims));
  std::filesystem::create_directories(c.train.run_dir);
  write_file_atomically(RunLayout(c.train.run_dir).config(), {head + resolved_config_yaml(c)});
}

}  // namespace tessera::engine::train
