#pragma once
// Runs independent jobs on a few threads and reports their results in list order, so the
// output reads the same however the threads interleave. Each job returns its summary text.
#include <functional>
#include <string>
#include <vector>

namespace tessera::sample {

using SummaryJob = std::function<std::string()>;

/// Runs `jobs` on min(workers, jobs.size()) threads (at least one), taking them in list order.
/// Hands each job's text to `report` in list order as soon as it and every job before it are
/// done. After the first failure (in list order) nothing more is reported; once every thread
/// has finished, that failure is rethrown.
void run_ordered_jobs(const std::vector<SummaryJob>& jobs, unsigned workers,
                      const std::function<void(const std::string&)>& report);

}  // namespace tessera::sample
