#include "tessera/core/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace tessera {
namespace {
constexpr double kQuietSeconds = 10.0;

std::string format_seconds(double s) {
  if (s < 0 || s > 1e7) return "?";
  char buf[32];
  const int t = static_cast<int>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", t / 3600, (t / 60) % 60);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
  return buf;
}
}  // namespace

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit, bool enabled)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), enabled_(enabled),
      tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (!finished_ && tty_ && enabled_ && done_ > 0) std::fputc('\n', stderr);
}

void ProgressBar::update(int64_t done, const std::string& extra) {
  done_ = done;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  if ((tty_ && since >= 0.1) || (!tty_ && since >= kQuietSeconds)) {
    last_draw_ = now;
    draw(extra, false);
  }
}

void ProgressBar::finish(const std::string& extra) {
  if (!enabled_ || finished_) return;
  finished_ = true;
  draw(extra, true);
}

void ProgressBar::draw(const std::string& extra, bool final_line) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? done_ / elapsed : 0.0;
  const double eta = rate > 0 ? (total_ - done_) / rate : -1;
  const double frac = total_ > 0 ? double(done_) / double(total_) : 1.0;
  constexpr int kWidth = 28;
  std::string bar(kWidth, ' ');
  for (int i = 0; i < static_cast<int>(frac * kWidth + 1e-9) && i < kWidth; ++i) bar[i] = '#';
  std::fprintf(stderr, "%s%s [%s] %lld/%lld %s  %.2f %s/s  %s %s%s%s", tty_ ? "\r\033[K" : "", label_.c_str(),
               bar.c_str(), static_cast<long long>(done_), static_cast<long long>(total_), unit_.c_str(), rate,
               unit_.c_str(), final_line ? "took" : "ETA", format_seconds(final_line ? elapsed : eta).c_str(),
               extra.empty() ? "" : "  ", extra.c_str());
  if (!tty_ || final_line) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace tessera
