#include <torch/torch.h>

#include "infer_parts.hpp"
#include "tessera/core/decomposition.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/tile_grid.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/parallel/modes/spatial.hpp"

namespace tessera::engine::infer {

void check_spatial_flags(const InferOptions& o, const parallel::Communicator& world, bool whole_scenes) {
  const std::string sp = "--sp " + std::to_string(o.sp);
  if (o.sp == 1) {
    if (world.size() > 1 && o.run_dir.empty() && !whole_scenes)
      throw Error("infer: " + std::to_string(world.size()) + " ranks need --run-dir RUN (tiles spread over the ranks, "
                  "finished ones kept in RUN/tiles/), --sp " + std::to_string(world.size()) +
                  " (every tile split over the ranks) or a folder of at least " + std::to_string(world.size()) +
                  " scenes (whole scenes per rank)");
    return;
  }
  if (world.size() != o.sp)
    throw Error(sp + ": needs exactly " + std::to_string(o.sp) + " ranks (mpirun -np " + std::to_string(o.sp) +
                "), got " + std::to_string(world.size()) + "; inference combines --sp with no other parallel axis");
}

SpatialMesh spatial_mesh(const InferOptions& o, int dims) {
  SpatialMesh mesh = o.sp_mesh.empty() ? SpatialMesh::along_first_axis(o.sp, dims) : SpatialMesh::parse(o.sp_mesh, dims);
  if (mesh.size() != o.sp)
    throw Error("--sp-mesh " + o.sp_mesh + ": " + std::to_string(mesh.size()) + " blocks, but --sp " +
                std::to_string(o.sp) + " (the mesh's product must equal --sp)");
  return mesh;
}

void check_spatial_model(const InferOptions& o, const UNetOptions& model, const SpatialMesh& mesh, int64_t tile,
                         const Index& extent) {
  const std::string sp = "--sp " + std::to_string(o.sp);
  if (!model.is_builtin())
    throw Error(sp + ": model " + model.name + " is a registry model; spatial parallelism splits the built-in U-Net's "
                "convolutions (run it without --sp)");
  if (model.padding != Padding::kSame)
    throw Error(sp + ": spatial parallelism needs a `same`-padding U-Net, the model's padding is " +
                to_string(model.padding) + " (use --padding same)");
  const Index sides = make_tile_grid(model, extent, tile).input_sides();
  for (int a = 0; a < mesh.dims(); ++a)
    block_offsets(sides[size_t(a)], mesh.parts[size_t(a)], unet_alignment(model),
                  "--tile " + std::to_string(tile) + " (input window " + std::to_string(sides[size_t(a)]) + " on axis " +
                      std::to_string(a) + ") under " + sp + " (mesh " + mesh.describe() + ")");
}

ForwardRunner spatial_forward(const parallel::SpatialDecomposition& decomposition) {
  return [&decomposition](UNet& net, const torch::Tensor& input) {
    const int64_t alignment = unet_alignment(net->options());
    const std::vector<int64_t> sides(input.sizes().begin() + 2, input.sizes().end());
    decomposition.check_halo_fits(sides, alignment, (net->options().kernel - 1) / 2);
    const torch::Tensor block = decomposition.scatter(input, 2, alignment).contiguous();
    torch::Tensor logits;
    {
      DecompositionScope scope(decomposition);
      logits = net->forward(block);
    }
    return decomposition.gather(logits.contiguous(), sides, 2, alignment);
  };
}

}  // namespace tessera::engine::infer
