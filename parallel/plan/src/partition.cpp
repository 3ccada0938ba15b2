#include "tessera/parallel/plan/partition.hpp"

#include <algorithm>
#include <limits>

#include "tessera/core/error.hpp"

namespace tessera::parallel {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_stages(int layers, int stages) {
  if (stages < 1 || stages > layers)
    throw Error("pipeline stages: K = " + std::to_string(stages) + " must be in 1.." + std::to_string(layers) +
                " (one layer at least per stage, " + std::to_string(layers) + " layers)");
}

Partition from_sizes(std::vector<int> sizes, const StageCost& cost) {
  Partition p;
  p.sizes = std::move(sizes);
  const int k = p.stages();
  for (int s = 0, first = 0; s < k; first += p.sizes[s], ++s) {
    p.stage_costs.push_back(cost(first, first + p.sizes[s] - 1, k - s));
    p.max_cost = std::max(p.max_cost, p.stage_costs.back());
  }
  return p;
}

}  // namespace

std::string to_string(BalanceStrategy s) {
  switch (s) {
    case BalanceStrategy::kNaive: return "naive";
    case BalanceStrategy::kMemory: return "memory";
    case BalanceStrategy::kTime: return "time";
  }
  return "?";
}

BalanceStrategy parse_balance_strategy(const std::string& s) {
  if (s == "naive") return BalanceStrategy::kNaive;
  if (s == "memory") return BalanceStrategy::kMemory;
  if (s == "time") return BalanceStrategy::kTime;
  throw Error("balance: '" + s + "' is not one of naive, memory, time");
}

int Partition::first(int stage) const {
  TESSERA_CHECK(stage >= 0 && stage < stages());
  int f = 0;
  for (int s = 0; s < stage; ++s) f += sizes[s];
  return f;
}

Partition balance_naive(int layers, int stages) {
  check_stages(layers, stages);
  Partition p;
  for (int s = 0; s < stages; ++s) p.sizes.push_back(layers / stages + (s < layers % stages ? 1 : 0));
  return p;
}

std::vector<Partition> min_max_partitions(int n, int k_max, const StageCost& cost) {
  check_stages(n, k_max);
  // g[k][i]: least max cost of layers i … n−1 in k stages, the first of which is the k-th
  // from the end; end[k][i]: where that first stage ends. Needs n − i >= k.
  std::vector<std::vector<double>> g(k_max + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> end(k_max + 1, std::vector<int>(n + 1, -1));
  g[0][n] = 0;
  for (int k = 1; k <= k_max; ++k)
    for (int i = n - k; i >= 0; --i)
      for (int j = i; j <= n - k; ++j) {
        if (g[k - 1][j + 1] == kInf) continue;
        const double c = std::max(cost(i, j, k), g[k - 1][j + 1]);
        if (c < g[k][i]) {
          g[k][i] = c;
          end[k][i] = j;
        }
      }
  std::vector<Partition> out;
  for (int k = 1; k <= k_max; ++k) {
    std::vector<int> sizes;
    for (int i = 0, r = k; r > 0; --r) {
      const int j = end[r][i];
      TESSERA_CHECK(j >= i);
      sizes.push_back(j - i + 1);
      i = j + 1;
    }
    out.push_back(from_sizes(std::move(sizes), cost));
  }
  return out;
}

Partition min_max_partition(int layers, int stages, const StageCost& cost) {
  check_stages(layers, stages);
  return std::move(min_max_partitions(layers, stages, cost).back());
}

Partition balance_by_time(const std::vector<double>& layer_seconds, int stages) {
  const int n = static_cast<int>(layer_seconds.size());
  check_stages(n, stages);
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + layer_seconds[i];
  return min_max_partition(n, stages, [&](int f, int l, int) { return prefix[l + 1] - prefix[f]; });
}

Partition balance_by_memory(const LayerSequence& seq, int stages, const StageMemoryOptions& o) {
  return min_max_partition(seq.size(), stages,
                           [&](int f, int l, int e) { return double(stage_bytes(seq, f, l, e, o)); });
}

Partition balance(BalanceStrategy strategy, const LayerSequence& seq, int stages, const StageMemoryOptions& o,
                  const std::vector<double>& layer_seconds) {
  switch (strategy) {
    case BalanceStrategy::kNaive: {
      Partition p = balance_naive(seq.size(), stages);
      return from_sizes(p.sizes, [&](int f, int l, int e) { return double(stage_bytes(seq, f, l, e, o)); });
    }
    case BalanceStrategy::kMemory: return balance_by_memory(seq, stages, o);
    case BalanceStrategy::kTime:
      if (static_cast<int>(layer_seconds.size()) != seq.size())
        throw Error("balance: time strategy needs one time per layer (" + std::to_string(seq.size()) + "), got " +
                    std::to_string(layer_seconds.size()));
      return balance_by_time(layer_seconds, stages);
  }
  throw Error("balance: unknown strategy");
}

}  // namespace tessera::parallel
