#pragma once
// Balancing a layer sequence (core/layer_sequence.hpp) over K pipeline stages: consecutive
// layers [first, last] per stage; a balance lists the layers per stage, e.g.
// {14, 24, 30, 22, 12, 7}; every stage is non-empty. The cost of a stage depends only on its
// layers and its position from the end (1F1B memory: core/memory_model.hpp), so the dynamic
// programme below is exact for it. Torch-free; thread safe (no shared state).
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/memory_model.hpp"

namespace tessera::parallel {

enum class BalanceStrategy { kNaive, kMemory, kTime };
std::string to_string(BalanceStrategy s);
BalanceStrategy parse_balance_strategy(const std::string& s);  ///< naive, memory, time

/// K consecutive non-empty stages over n layers and the cost each one has.
struct Partition {
  std::vector<int> sizes;           ///< layers per stage (the balance); Σ = n, each >= 1
  std::vector<double> stage_costs;  ///< cost of each stage under the model used
  double max_cost = 0;              ///< max of stage_costs

  int stages() const { return static_cast<int>(sizes.size()); }
  int first(int stage) const;  ///< index of the stage's first layer
};

/// Cost of one stage holding layers [first, last] (inclusive, 0-based) that is the
/// `from_end`-th stage counted from the last one (1 = last stage). 1F1B memory depends on it.
using StageCost = std::function<double(int first, int last, int from_end)>;

/// Equal layer counts; the first n mod K stages get one layer more. Costs are left empty.
/// Throws tessera::Error naming `stages` unless 1 <= stages <= layers.
Partition balance_naive(int layers, int stages);

/// The exact min-max partition: minimises the largest stage cost over every split of
/// `layers` into `stages` consecutive non-empty stages (dynamic programming, O(K n²) cost
/// calls). Ties go to the split whose first stage ends earliest. Throws like balance_naive.
Partition min_max_partition(int layers, int stages, const StageCost& cost);

/// The same DP for every K = 1 … k_max at once (element K − 1); k_max <= layers.
std::vector<Partition> min_max_partitions(int layers, int k_max, const StageCost& cost);

/// Min-max over measured (or predicted) per-layer times; stage time is their sum.
Partition balance_by_time(const std::vector<double>& layer_seconds, int stages);

/// Min-max partition of stage_bytes: the memory-aware balance.
Partition balance_by_memory(const LayerSequence& seq, int stages, const StageMemoryOptions& o);

/// Any strategy by name; `layer_seconds` is used by kTime only (one entry per layer).
Partition balance(BalanceStrategy strategy, const LayerSequence& seq, int stages, const StageMemoryOptions& o,
                  const std::vector<double>& layer_seconds = {});

}  // namespace tessera::parallel
