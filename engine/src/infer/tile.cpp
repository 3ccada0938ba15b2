#include <fmt/format.h>
#include <torch/torch.h>

#include "infer_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/core/stream_executor.hpp"
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

namespace {

// Why this image does not stream, or "" when it can.
std::string stream_refused(const InferOptions& o, const UNetOptions& model) {
  if (auto why = stream_refusal(model)) return *why;
  if (o.sp > 1) return "--sp splits tiles across ranks";
  if (parse_tile_option(o.tile) > 0) return "--tile " + o.tile + " given";
  return "";
}

}  // namespace

ImageRun choose_image_run(const InferOptions& o, const UNetOptions& model, const Index& training_window,
                          const Index& extent, const TileChoice& tile, parallel::Communicator& group) {
  ImageRun run;
  const WindowChoice window = choose_window(o.window, model, training_window, exact_only_flags(o));
  run.window_why = window.why;
  if (window.gaussian) {
    run.sliding = SlidingWindowOptions().with_window(window.window).with_mirror(o.tta == "mirror");
    if (o.tta == "mirror") run.window_why += ", mirrored";
    return run;
  }
  if (o.tta == "mirror") throw Error("--tta mirror: only with sliding windows, and --window chose " + window.why);
  run.tile_recompute = tile_recompute(model, extent, tile.tile);
  if (o.mode == "tile") return run;
  const std::string refused = stream_refused(o, model);
  if (o.mode == "stream" && !refused.empty()) throw Error("--mode stream: " + refused + "; use --mode tile");
  if (!refused.empty()) {
    run.why = "tiles (auto: " + refused + ")";
    return run;
  }
  const StripChoice strip =
      choose_strip(model, extent, tile_choice_options(o, group).memory_budget, resident_bytes(), at::get_num_threads());
  if (!o.run_dir.empty()) run.band = band_rows(model, extent, group.size());
  const ModeChoice mode = choose_mode(model, extent, tile, strip, run.band);
  std::string why = mode.why;
  if (run.band > 0)
    why += fmt::format(", bands of {} rows over {} ranks recompute {:.2f}x", run.band, group.size(),
                       band_recompute(model, extent, run.band));
  if (o.mode == "auto" && !mode.stream) {
    run.why = "tiles (auto: " + why + ")";
    return run;
  }
  run.strip = strip;
  run.why = std::string("stream (") + (o.mode == "auto" ? "auto: " : "--mode stream; ") + why + ")";
  return run;
}

}  // namespace tessera::engine::infer
