// tessera bench pipeline --memory-cap: the largest trainable input side per rank, measured
// (see bench_pipeline.cpp for the memory figure) and predicted by the planner.
#include <algorithm>
#include <cstdio>

#include <torch/torch.h>

#include "bench_common.hpp"
#include "bench_pipeline.hpp"

namespace tessera::bench::pipeline_bench {
namespace {

struct CapProbe {
  int64_t peak = 0;  // max over ranks, measured
  std::vector<int> balance;
};

// Every rank calls. kOneRank: each rank trains the whole network alone (self communicator).
CapProbe probe(const BenchPipelineOptions& f, const Setup& s, parallel::ProcessGrid& grid, parallel::Communicator& self,
               const UNetImpl& net, int64_t side, CapConfig config) {
  const LayerSequence seq = unet_layer_sequence(s.options, side);
  const int k = config == CapConfig::kOneRank ? 1 : grid.shape().pipeline;
  CapProbe p;
  p.balance = partition_for(s, seq, config == CapConfig::kMemory ? "memory" : "naive", k, f.batch).sizes;
  const auto po = s.pipeline_options(p.balance, f.batch);
  torch::manual_seed(1);
  const Batch b = make_batch(s.options, f.batch, side);
  grid.pipeline().barrier();
  const StagePeak mine = config == CapConfig::kOneRank ? measure_stage_peak(net, side, self, self, po, b)
                                                        : measure_stage_peak(net, side, grid.pipeline(), grid.data(), po, b);
  torch::Tensor peak = torch::tensor({mine.total}, torch::kInt64);
  grid.pipeline().allreduce(peak, parallel::ReduceOp::kMax);
  p.peak = peak.item<int64_t>();
  return p;
}

// The planner's largest stage for `config` at `side` (calibrated model when there is one).
int64_t predicted_peak(const BenchPipelineOptions& f, const Setup& s, int k, int64_t side, CapConfig config) {
  const LayerSequence seq = unet_layer_sequence(s.options, side);
  if (config == CapConfig::kOneRank) k = 1;
  const auto mo = memory_options(s, seq, f.batch, true);
  const auto p = partition_for(s, seq, config == CapConfig::kMemory ? "memory" : "naive", k, f.batch);
  int64_t most = 0;
  for (int st = 0; st < k; ++st) {
    const int first = p.first(st);
    most = std::max(most, stage_bytes(seq, first, first + p.sizes[size_t(st)] - 1, k - st, mo));
  }
  return most;
}

}  // namespace

CapRow largest_side(const BenchPipelineOptions& f, const Setup& s, parallel::ProcessGrid& grid, parallel::Communicator& self,
                    const UNetImpl& net, CapConfig config, int64_t cap) {
  // Valid sides: s.side + j · step (step: the model's alignment keeps the side valid).
  const int64_t step = unet_alignment(s.options);
  const int64_t j_max = (f.max_side - s.side) / step;
  CapRow row;
  row.ranks = config == CapConfig::kOneRank ? 1 : grid.shape().pipeline;
  row.name = config == CapConfig::kOneRank ? "1 rank" : (config == CapConfig::kNaive ? "naive" : "memory");
  auto fits = [&](int64_t j) {
    const int64_t side = s.side + j * step;
    const CapProbe p = probe(f, s, grid, self, net, side, config);
    ++row.probes;
    if (grid.pipeline().rank() == 0)
      std::fprintf(stderr, "  %s: side %lld peak %.1f MiB (%s)\n", row.name.c_str(), (long long)side, mib(p.peak),
                   p.peak <= cap ? "fits" : "over");
    if (p.peak <= cap) {
      if (side > row.side) {
        row.side = side;
        row.peak = p.peak;
        row.balance = p.balance;
      }
      return true;
    }
    if (row.over_side == 0 || side < row.over_side) {
      row.over_side = side;
      row.over_peak = p.peak;
    }
    return false;
  };
  for (int64_t j = 0; j <= j_max; ++j) {
    const int64_t side = s.side + j * step;
    if (predicted_peak(f, s, grid.shape().pipeline, side, config) > cap) break;
    row.predicted_side = side;
  }
  // Measured search, starting at the prediction.
  largest_fitting(row.predicted_side ? (row.predicted_side - s.side) / step : 0, j_max, fits);
  return row;
}

}  // namespace tessera::bench::pipeline_bench
