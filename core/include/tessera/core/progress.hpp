#pragma once
// A progress line for long work: count, rate, ETA. Redraws in place on a terminal
// (stderr is a tty); otherwise prints a plain line at most every `quiet_seconds`.
// Not thread safe; update from one thread.
#include <chrono>
#include <cstdint>
#include <string>

namespace tessera {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, std::string unit = "tiles", bool enabled = true);
  ~ProgressBar();
  void update(int64_t done, const std::string& extra = "");
  void finish(const std::string& extra = "");

 private:
  void draw(const std::string& extra, bool final_line);
  std::string label_, unit_;
  int64_t total_, done_ = 0;
  bool enabled_, tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace tessera
