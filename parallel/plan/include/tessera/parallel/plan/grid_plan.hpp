#pragma once
// The process grid's combinations for training: domains × data × pipeline × spatial
// (N · dp · pp · sp ranks, `tessera train --dp D --pp K --sp P` with N domains), each priced by
// the planner's memory and time models, the fastest that fits chosen, and for every other
// combination of (pp, sp) the reason it lost. Torch-free; thread safe (no shared state).
//
// One combination (N domains, K stages, P blocks of a mesh, M micro-batches, inset T):
//   - every domain has its own ranks, ⌊devices / N⌋ of them, and its own image of the extent
//     asked (a scene per domain); dp = min(⌊devices / N / (K·P)⌋, ⌈tiles / M⌉) replicas;
//   - per-rank memory: the memory-aware balance (partition.hpp, min-max of stage_bytes over
//     K stages, core/memory_model.hpp) of the layer sequence of the LARGEST block of the tile
//     (box_layer_sequence; the whole tile when P = 1), plus the decomposition's own tensors
//     (spatial_plan()'s bytes beyond stage_bytes of the whole block: halo-padded inputs,
//     norm intermediates), for the micro-batches the first stage holds, shared by the K
//     stages, plus with N > 1 a Domain Separation
//     Network's private encoder, reconstruction decoder and classifier (16 B per parameter,
//     dsn_spec.hpp), plus the per-process baseline;
//   - time per step: (M + K − 1) × the slowest stage's micro-batch (its layers' seconds ×
//     the block's share of the tile, plus its share 1/K of the halo exchanges), plus a ring
//     allreduce of a stage's parameters over the dp · P ranks holding it and, with N > 1, of
//     the shared parameters over the domains; pass = ⌈tiles / (dp · M)⌉ steps.
// The search: T over at most 8 of the planner's tile candidates, K = 1, 2, 4, … (max_stages),
// P = 1, 2, 4, … with every mesh of spatial_meshes() (`same` padding, consider_spatial),
// M = 1, 2, 4, … (max_micro_batches; 1 when K = 1), no checkpointing unless asked.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/parallel/plan/plan.hpp"

namespace tessera::parallel {

/// The best layout of one (pp, sp) pair, or why none fits.
struct GridLayout {
  int domains = 1;
  int data_parallel = 0;     ///< dp per domain
  int stages = 1;            ///< pp
  int spatial = 1;           ///< sp
  std::vector<int> mesh;     ///< blocks per axis (y, x) or (z, y, x); empty when sp = 1
  int micro_batches = 1;
  int64_t tile_inset = 0;
  int devices_used = 0;      ///< N · dp · pp · sp
  int64_t rank_bytes = 0;    ///< predicted peak per rank (baseline included); least needed when !fits
  double step_seconds = 0;
  double halo_seconds = 0;   ///< of step_seconds: the halo exchanges
  int64_t steps = 0;         ///< per pass: ⌈tiles / (dp · M)⌉
  double pass_seconds = 0;   ///< one pass over every domain's image (domains run side by side)
  bool fits = false;
  std::string verdict;       ///< "chosen", or why it lost, one sentence
};

struct GridPlan {
  std::vector<GridLayout> layouts;  ///< one per (pp, sp) searched, ascending pp then sp
  size_t chosen = 0;                ///< index into layouts
  std::vector<std::string> reasons; ///< why the chosen layout, one sentence each
};

/// The per-rank peak (baseline included) the model above predicts for one layout: `stages`
/// stages over the largest block of `mesh` (empty: whole tiles) of the tile whose layer
/// sequence is `seq`, `micro_batches` tiles per replica step under o.schedule, `domains`
/// domains. Throws tessera::Error when the tile cannot be split so or the stages exceed the layers.
int64_t layout_rank_bytes(const PlanOptions& o, const LayerSequence& seq, int domains, int stages,
                          const std::vector<int>& mesh, int micro_batches);

/// The search above for `domains` domains (>= 1). Throws tessera::Error naming `domains`
/// when it is below 1 or above the devices, and naming `device_memory` when nothing fits
/// (with the least memory any combination needs).
GridPlan plan_grid(const PlanOptions& o, int domains);

}  // namespace tessera::parallel
