#include "tessera/run/process_memory.hpp"

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

// A kB field of /proc/self/status, in bytes.
int64_t status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  throw Error("/proc/self/status: no " + field + " field (memory measurement needs Linux)");
}

}  // namespace

int64_t resident_bytes() { return status_bytes("VmRSS"); }

double process_cpu_seconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) throw Error("getrusage: cannot read this process's CPU time");
  const auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

int64_t peak_resident_bytes() { return status_bytes("VmHWM"); }

void fix_mmap_threshold(int64_t bytes) {
  if (mallopt(M_MMAP_THRESHOLD, int(bytes)) != 1)
    throw Error("mallopt: cannot fix the mmap threshold at " + std::to_string(bytes) + " bytes");
}

PeakMemoryMeter::PeakMemoryMeter() {
  fix_mmap_threshold(64 << 10);
  malloc_trim(0);
  std::ofstream clear("/proc/self/clear_refs");
  if (!(clear << "5" << std::flush)) throw Error("/proc/self/clear_refs: cannot reset the peak resident size");
  start_ = resident_bytes();
}

int64_t PeakMemoryMeter::peak_increase() const { return std::max<int64_t>(0, status_bytes("VmHWM") - start_); }

}  // namespace tessera
