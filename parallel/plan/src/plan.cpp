#include "tessera/parallel/plan/plan.hpp"

#include <tuple>

#include <fmt/format.h>

#include "plan_search.hpp"

namespace tessera::parallel {

using namespace plan_detail;

Layout plan(const PlanOptions& o) {
  o.validate();
  Search s = search(o);
  const size_t chosen = choose_mode(s);
  const SpatialSearch sp = search_spatial(o, s);
  if (sp.least_memory < s.least_memory) std::tie(s.least_memory, s.least_memory_at) = std::tie(sp.least_memory, sp.least_memory_at);
  const Candidate& pipeline = s.by_mode[chosen].best;
  const bool pipeline_fits = pipeline.t >= 0;
  const bool spatial_wins =
      sp.best.sp > 0 && (!pipeline_fits || sp.best.pass < pipeline.pass ||
                         (sp.best.pass == pipeline.pass && sp.best.dp * sp.best.sp < pipeline.dp * pipeline.k));
  if (!pipeline_fits && !spatial_wins) throw nothing_fits(o, s);
  if (spatial_wins) {
    Layout L = spatial_layout(o, sp.best);
    L.reasons.push_back(fmt::format("memory: each rank needs {:.2f} GiB of {:.2f} GiB ({:.0f}%): the parameters, "
                                    "gradients and optimiser state whole, the activations of its block",
                                    gib(double(L.peak_memory_bytes)), gib(double(o.device_memory_bytes)),
                                    100.0 * double(L.peak_memory_bytes) / double(o.device_memory_bytes)));
    L.reasons.push_back(explain_spatial(o, sp, L, true, pipeline_fits ? pipeline.pass : kInf));
    L.reasons.push_back(fmt::format("time: {:.3g} s per pass at {:.3g} GFLOP/s per device", L.pass_seconds,
                                    o.device_flops / 1e9));
    return L;
  }
  Layout L = layout_of(o, s, chosen);
  explain_memory(o, s, chosen, L, L.reasons);
  explain_parallelism(o, s, chosen, L, L.reasons);
  L.reasons.push_back(explain_spatial(o, sp, L, false, L.pass_seconds));
  explain_checkpoint_and_time(o, s, chosen, L, L.reasons);
  return L;
}

}  // namespace tessera::parallel
