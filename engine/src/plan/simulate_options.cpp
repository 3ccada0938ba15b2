#include "tessera/engine/simulate_options.hpp"

#include <cmath>

#include "../flag_checks.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/core/precision.hpp"
#include "tessera/engine/layout_json.hpp"
#include "tessera/parallel/plan/partition.hpp"

namespace tessera::engine {
namespace {

void at_least(const char* flag, int64_t v, int64_t least) {
  if (v < least) throw Error(std::string(flag) + " must be >= " + std::to_string(least) + ", got " + std::to_string(v));
}

}  // namespace

void SimulateOptions::validate() const {
  if (cluster.empty()) throw Error("--cluster is required (e.g. clusters/summit.yaml)");
  parse_image(image);  // names --image
  at_least("--images", images, 1);
  at_least("--tiles", tiles, 0);
  at_least("--tile", tile, 0);
  at_least("--input-side", input_side, 0);
  if (tile > 0 && input_side > 0)
    throw Error("--tile (the inset each tile keeps) and --input-side (the network's input) both given; give one");
  at_least("--nodes", nodes, 0);
  at_least("--dp", dp, 1);
  at_least("--pp", pp, 1);
  at_least("--sp", sp, 1);
  at_least("--micro-batches", micro_batches, 1);
  at_least("--batch", batch, 1);
  if (!(per_tile_overhead >= 0 && std::isfinite(per_tile_overhead)))
    throw Error("--per-tile-overhead must be a finite number of seconds >= 0, got " + std::to_string(per_tile_overhead));
  check_flag("--schedule", [&] { parse_pipeline_schedule(schedule); });
  check_flag("--balance", [&] { parallel::parse_balance_strategy(balance); });
  check_flag("--precision", [&] { parse_precision(precision); });
  check_flag("--activation-checkpoint", [&] { parse_activation_checkpoint(activation_checkpoint); });
}

}  // namespace tessera::engine
