#pragma once
// The planner's search, shared by its files (plan_search.cpp: pipeline and data-parallel
// layouts; plan_spatial.cpp: spatial splits; plan_explain.cpp: the reasons; plan.cpp: the
// choice between them). Internal to parallel/plan/.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"

namespace tessera::parallel::plan_detail {

constexpr int64_t kFloatBytes = 4;
constexpr double kInf = std::numeric_limits<double>::infinity();

inline double gib(double bytes) { return bytes / double(int64_t{1} << 30); }

// What one tile inset T costs whatever M, K and checkpointing are: the network at T's input
// side, the memory terms of every stage [first, last], and prefix sums of the per-layer
// seconds and parameters, so a stage's time and allreduce volume are two lookups.
struct TileModel {
  int64_t inset = 0;  // T
  LayerSequence seq;
  int layers = 0;
  int k_max = 0;                      // K searched in 1 … k_max
  int64_t tiles = 0;                  // per pass over the image
  std::vector<StageTerms> terms;      // stage [first, last] at first · layers + last
  std::vector<double> seconds_prefix;  // Σ seconds of layers 0 … i − 1
  std::vector<int64_t> param_prefix;   // Σ parameters of layers 0 … i − 1

  const StageTerms& stage(int first, int last) const { return terms[size_t(first) * layers + last]; }
  double seconds(int first, int size) const { return seconds_prefix[first + size] - seconds_prefix[first]; }
  int64_t params(int first, int size) const { return param_prefix[first + size] - param_prefix[first]; }
};

// Aligned insets from the alignment `a` up to the largest image axis (rounded up); a geometric
// subset when there are more than max_tile_candidates; only the asked inset when there is one.
std::vector<int64_t> tile_candidates(const PlanOptions& o, int64_t a);

// nullopt when the network cannot take T's input side (e.g. a `same` network whose input
// side is odd before a pooling).
std::optional<TileModel> model_tile(const PlanOptions& o, int64_t inset);

// One layout that fits: indices into the searched values and its predictions.
struct Candidate {
  int t = -1, m = 0, k = 0;  // indices: tile candidate, micro-batches value, stages
  double pass = kInf, step = 0, max_stage_seconds = 0;
  int dp = 0;
  int64_t steps = 0, peak = 0, tiles = 0;
  Partition memory;  // stage costs in bytes, baseline included
  std::vector<double> stage_seconds;
};

// What the search found with one checkpointing mode.
struct ModeResult {
  // max_cost[t][m][K − 1]: the memory-balanced largest stage (bytes, baseline included);
  // empty where the tile was not searched or M exceeds the tiles.
  std::vector<std::vector<std::vector<double>>> max_cost;
  Candidate best;  // the fastest layout that fits (t < 0: none)
};

struct Search {
  std::vector<int64_t> sides;  // tile insets T
  std::vector<int> micro;      // M values
  std::vector<ActivationCheckpoint> modes;
  std::vector<ModeResult> by_mode;  // one per mode
  double least_memory = kInf;       // over every candidate, fitting or not
  std::string least_memory_at;

  void note_memory(double bytes, int64_t T, int K, int M, ActivationCheckpoint ck) {
    if (bytes >= least_memory) return;
    least_memory = bytes;
    least_memory_at = fmt::format("T = {}, K = {}, M = {}, activation checkpointing {}", T, K, M, to_string(ck));
  }
};

/// Every pipeline / data-parallel layout of every tile candidate and checkpointing mode.
Search search(const PlanOptions& o);
// The mode whose best layout is best; ties keep the earlier (never).
size_t choose_mode(const Search& s);
Error nothing_fits(const PlanOptions& o, const Search& s);
Layout layout_of(const PlanOptions& o, const Search& s, size_t chosen);

struct SpatialCandidate {
  int64_t inset = 0;
  SpatialPlan plan;
  int sp = 0, dp = 0;
  int64_t tiles = 0, steps = 0, peak = 0;
  double tile_seconds = 0, step = 0, pass = kInf;
};

// sp = 2 … devices over every mesh of spatial_meshes() at every tile candidate: the fastest
// layout that fits (better()'s order), and the least memory any split needs.
struct SpatialSearch {
  SpatialCandidate best;
  double least_memory = kInf;
  std::string least_memory_at;
};

SpatialSearch search_spatial(const PlanOptions& o, const Search& s);
Layout spatial_layout(const PlanOptions& o, const SpatialCandidate& c);

// The reasons (plan_explain.cpp).
// Which memory limits bind: the pipeline (K − 1 stages would not fit), the tile (the next
// inset would not fit with the same K and M) or the image (no larger inset).
void explain_memory(const PlanOptions& o, const Search& s, size_t chosen, const Layout& L,
                    std::vector<std::string>& why);
// Halo overhead, what bounds dp (the tiles or the devices) and the pipeline's bubble.
void explain_parallelism(const PlanOptions& o, const Search& s, size_t chosen, const Layout& L,
                         std::vector<std::string>& why);
// Checkpointing (as asked, or what the other mode would have cost) and where the times come from.
void explain_checkpoint_and_time(const PlanOptions& o, const Search& s, size_t chosen, const Layout& L,
                                 std::vector<std::string>& why);
// Why sp was chosen, or what it would have cost.
std::string explain_spatial(const PlanOptions& o, const SpatialSearch& sp, const Layout& L, bool chosen,
                            double pipeline_pass);

}  // namespace tessera::parallel::plan_detail
