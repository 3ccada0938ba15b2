#pragma once
// Runs a command as a child process and measures it the way a user would: wall time and
// the child's own peak resident memory, optionally capturing stdout.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::cli {

struct ChildResult {
  int exit_code = -1;        ///< exit status, or 128 + signal
  double seconds = 0;        ///< wall clock
  double peak_rss_mib = 0;   ///< this executable as the child: its VmHWM at exit; another program: wait4's ru_maxrss
                             ///< (which starts from this process's own high-water mark)
  std::string out;           ///< stdout when captured
};

/// Throws tessera::Error when the program cannot be started.
ChildResult run_child(const std::vector<std::string>& argv, bool capture_stdout);

/// With TESSERA_PEAK_RSS_FILE=PATH in the environment (run_child sets it for this executable
/// as its child): this process's own peak resident memory, VmHWM in KiB, written to PATH at exit.
/// Called first thing in main.
void report_peak_rss_at_exit();

/// Absolute path of the running executable.
std::string self_executable();

/// `tessera args…` (this executable) on `ranks` ranks — under `mpirun --allow-run-as-root
/// --oversubscribe -np ranks` when ranks > 1 — with stdout captured. Throws tessera::Error
/// "WHAT failed (exit N; its error is above)" when it fails.
ChildResult run_ranks(const std::string& mpirun, int ranks, const std::vector<std::string>& args, const std::string& what);

/// The last line of `out` that is a JSON object (the benches' machine-readable report).
/// Throws tessera::Error "WHAT printed no JSON report" when there is none.
nlohmann::json last_json(const std::string& out, const std::string& what);

}  // namespace tessera::cli
