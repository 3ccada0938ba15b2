#pragma once
// `tessera simulate` as a library: a discrete-event simulation of one pass (a training epoch,
// or inference over the images) of a layout on a described cluster (parallel/plan/simulator.hpp,
// clusters/*.yaml): time per pass with its breakdown, per-device peak memory, optionally the
// step's Gantt chart as SVG. A cluster whose device is "calibrated" takes this machine's
// measurements from the calibration file (calibration.hpp).
//
// print_seed_tables(): the seed paper's pipeline experiments as predictions: on one node, the
// speed-up of 1 … 6 pipeline stages at a 1434² tile with 2 micro-batches per stage, and the
// 6-stage speed-up at tile sides 192, 512 and 1024. Torch-free.
#include "tessera/engine/simulate_options.hpp"
#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::engine {

/// One simulated pass: what was simulated, on which cluster, and the result.
struct SimulatedPass {
  parallel::SimulationOptions options;
  parallel::ClusterModel cluster;
  parallel::SimulationResult result;
};

/// Simulates the layout of `o`. Throws tessera::Error naming the flag or the file.
SimulatedPass simulate_pass(const SimulateOptions& o);

/// The text report of a pass.
void print_simulated_pass(const SimulateOptions& o, const SimulatedPass& pass);

/// --seed-tables: the seed's pipeline speed-ups on one node of the cluster, printed.
void print_seed_tables(const SimulateOptions& o);

/// The command: validate(), then the seed tables, or one pass printed as text or JSON (and
/// its Gantt chart with `gantt`).
void run_simulate(const SimulateOptions& o);

}  // namespace tessera::engine
