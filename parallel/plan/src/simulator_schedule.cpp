// The pipeline schedule, event by event: each stage runs its ops in the schedule's order; an
// op starts when its stage is free and its input has arrived.
#include <algorithm>

#include "tessera/core/error.hpp"
#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::parallel {
namespace {

struct Op {
  ScheduleEvent::Kind kind;
  int micro_batch;
};

// The order in which stage s of K runs its reads, forwards and backwards for M micro-batches.
std::vector<Op> stage_order(int s, int K, int M, bool training, PipelineScheduleKind schedule) {
  using K_ = ScheduleEvent::Kind;
  std::vector<Op> ops;
  auto forward = [&](int m) {
    if (s == 0) ops.push_back({K_::kRead, m});
    ops.push_back({K_::kForward, m});
  };
  if (!training) {
    for (int m = 0; m < M; ++m) forward(m);
    return ops;
  }
  if (schedule == PipelineScheduleKind::kGPipe) {
    for (int m = 0; m < M; ++m) forward(m);
    for (int m = M - 1; m >= 0; --m) ops.push_back({K_::kBackward, m});
    return ops;
  }
  // 1F1B: K − s − 1 warm-up forwards, then one forward and one backward in turn, then the rest.
  const int warmup = std::min(K - s - 1, M);
  for (int m = 0; m < warmup; ++m) forward(m);
  for (int i = 0; i < M - warmup; ++i) {
    forward(warmup + i);
    ops.push_back({K_::kBackward, i});
  }
  for (int m = M - warmup; m < M; ++m) ops.push_back({K_::kBackward, m});
  return ops;
}

constexpr double kNotYet = -1;

// An op's seconds on stage s; a checkpointed micro-batch's backward first reruns its forward
// (every micro-batch's, or all but the last's).
double op_seconds(const StageCosts& costs, int s, const Op& op, int M) {
  switch (op.kind) {
    case ScheduleEvent::Kind::kRead: return costs.read;
    case ScheduleEvent::Kind::kForward: return costs.forward[s];
    default: {
      const bool rerun = !costs.recompute.empty() && (costs.recompute_last || op.micro_batch != M - 1);
      return costs.backward[s] + (rerun ? costs.recompute[s] : 0.0);
    }
  }
}

}  // namespace

std::string to_string(ScheduleEvent::Kind k) {
  switch (k) {
    case ScheduleEvent::Kind::kForward: return "forward";
    case ScheduleEvent::Kind::kBackward: return "backward";
    case ScheduleEvent::Kind::kSend: return "send";
    case ScheduleEvent::Kind::kAllreduce: return "allreduce";
    case ScheduleEvent::Kind::kRead: return "read";
    case ScheduleEvent::Kind::kHalo: return "halo";
    case ScheduleEvent::Kind::kUpdate: return "update";
  }
  return "?";
}

ScheduleResult simulate_schedule(const StageCosts& costs, int micro_batches, PipelineScheduleKind schedule) {
  const int K = static_cast<int>(costs.forward.size());
  const int M = micro_batches;
  const bool training = !costs.backward.empty();
  TESSERA_CHECK(K >= 1 && M >= 1);
  TESSERA_CHECK(!training || static_cast<int>(costs.backward.size()) == K);
  TESSERA_CHECK(static_cast<int>(costs.send.size()) == K - 1);
  TESSERA_CHECK(costs.allreduce.empty() || static_cast<int>(costs.allreduce.size()) == K);
  TESSERA_CHECK(costs.update.empty() || static_cast<int>(costs.update.size()) == K);
  TESSERA_CHECK(costs.recompute.empty() || static_cast<int>(costs.recompute.size()) == K);

  // end times of each stage's forward / backward per micro-batch (kNotYet until simulated)
  std::vector<std::vector<double>> f_end(K, std::vector<double>(M, kNotYet)), b_end = f_end;
  std::vector<std::vector<Op>> order(K);
  for (int s = 0; s < K; ++s) order[s] = stage_order(s, K, M, training, schedule);
  std::vector<size_t> next(K, 0);
  std::vector<double> free_at(K, 0);
  ScheduleResult r;
  r.busy.assign(K, 0);

  // When the op's input is there (kNotYet if its producer has not run yet).
  auto ready = [&](int s, const Op& op) -> double {
    switch (op.kind) {
      case ScheduleEvent::Kind::kRead: return 0;
      case ScheduleEvent::Kind::kForward:
        if (s == 0) return 0;  // after its read, which precedes it on the stage
        return f_end[s - 1][op.micro_batch] < 0 ? kNotYet : f_end[s - 1][op.micro_batch] + costs.send[s - 1];
      case ScheduleEvent::Kind::kBackward:
        if (s == K - 1) return f_end[s][op.micro_batch];
        return b_end[s + 1][op.micro_batch] < 0 ? kNotYet : b_end[s + 1][op.micro_batch] + costs.send[s];
      default: return 0;
    }
  };
  auto duration = [&](int s, const Op& op) { return op_seconds(costs, s, op, M); };

  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < K; ++s) {
      while (next[s] < order[s].size()) {
        const Op& op = order[s][next[s]];
        const double at = ready(s, op);
        if (at < 0) break;  // waits for another stage
        const double start = std::max(free_at[s], at), end = start + duration(s, op);
        free_at[s] = end;
        r.events.push_back({op.kind, s, op.micro_batch, start, end});
        if (op.kind == ScheduleEvent::Kind::kForward) {
          f_end[s][op.micro_batch] = end;
          r.busy[s] += end - start;
          if (s + 1 < K) r.events.push_back({ScheduleEvent::Kind::kSend, s, op.micro_batch, end, end + costs.send[s]});
        } else if (op.kind == ScheduleEvent::Kind::kBackward) {
          b_end[s][op.micro_batch] = end;
          r.busy[s] += end - start;
          if (s > 0) r.events.push_back({ScheduleEvent::Kind::kSend, s, op.micro_batch, end, end + costs.send[s - 1]});
        }
        ++next[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < K; ++s) TESSERA_CHECK(next[s] == order[s].size());  // a schedule never deadlocks

  for (int s = 0; s < K; ++s) {
    if (!costs.allreduce.empty() && costs.allreduce[s] > 0) {
      r.events.push_back({ScheduleEvent::Kind::kAllreduce, s, -1, free_at[s], free_at[s] + costs.allreduce[s]});
      free_at[s] += costs.allreduce[s];
    }
    if (!costs.update.empty() && costs.update[s] > 0) {
      r.events.push_back({ScheduleEvent::Kind::kUpdate, s, -1, free_at[s], free_at[s] + costs.update[s]});
      free_at[s] += costs.update[s];
    }
  }
  for (const ScheduleEvent& e : r.events) r.makespan = std::max(r.makespan, e.end);
  return r;
}

}  // namespace tessera::parallel
