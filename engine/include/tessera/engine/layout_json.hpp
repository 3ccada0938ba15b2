#pragma once
// What `tessera plan` and `tessera simulate` share: the --image extent and a simulation's
// JSON report (the same keys in `simulate --json` and in `plan --simulate --json`'s
// "simulation"). Torch-free.
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/core/geometry.hpp"
#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::engine {

/// "W×H" or "W×H×D" ('x' or '×') → extent in axis order (y, x) or (z, y, x). Throws
/// tessera::Error naming --image and the text.
Index parse_image(const std::string& text);

/// One simulated pass: pass and step seconds, steps, tiles, one tile's seconds and FLOPs, the
/// stage balance, the breakdown (compute, bubble, halo, allreduce, io, optimizer), per-device
/// peak bytes and whether they fit.
nlohmann::json simulation_json(const parallel::SimulationResult& r, const parallel::SimulationOptions& o);

}  // namespace tessera::engine
