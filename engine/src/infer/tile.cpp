#include <torch/torch.h>

#include "infer_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera::engine::infer {

TileChoiceOptions tile_choice_options(const InferOptions& o, parallel::Communicator& world) {
  TileChoiceOptions t;
  t.tile = parse_tile_option(o.tile);
  if (!o.memory_budget.empty()) {
    if (t.tile > 0) throw Error("--memory-budget " + o.memory_budget + ": only used with --tile auto");
    t.memory_budget = parse_memory_size(o.memory_budget);
  } else if (t.tile == 0) {
    t.memory_budget = default_memory_budget(parallel::launch_info().local_size);
  }
  if (!o.run_dir.empty()) t.min_tiles = world.size();  // work for every rank
  t.validate();
  return t;
}

TileChoice resolve_tile(const TileChoiceOptions& o, const UNetOptions& model, const Index& extent, int batch,
                        parallel::Communicator& world) {
  TileChoice c = choose_tile(o, extent, model, batch, resident_bytes());
  if (world.size() > 1) {
    const int64_t least = world.allgather(torch::tensor({c.tile})).min().item<int64_t>();
    if (least != c.tile) {
      c.tile = least;
      c.steps = clamped_steps(extent, least, unet_alignment(model));
      c.reason += "; smaller on another rank";
    }
  }
  return c;
}

}  // namespace tessera::engine::infer
