#pragma once
// Runs a command as a child process and measures it the way a user would: wall time and
// the child's own peak resident memory (wait4's rusage), optionally capturing stdout.
#include <string>
#include <vector>

namespace tessera::cli {

struct ChildResult {
  int exit_code = -1;        ///< exit status, or 128 + signal
  double seconds = 0;        ///< wall clock
  double peak_rss_mib = 0;   ///< ru_maxrss of the child
  std::string out;           ///< stdout when captured
};

/// Throws tessera::Error when the program cannot be started.
ChildResult run_child(const std::vector<std::string>& argv, bool capture_stdout);

/// Absolute path of the running executable.
std::string self_executable();

}  // namespace tessera::cli
