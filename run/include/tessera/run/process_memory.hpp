#pragma once
// This process's memory as the operating system sees it (Linux /proc/self/status), for
// measuring the peak memory of a piece of work: what the pipeline benchmark and the memory
// calibration compare with the planner's model; and its CPU time, for the telemetry's
// per-process load. Torch-free.
#include <cstdint>

namespace tessera {

/// Resident set size now (VmRSS), bytes. Throws tessera::Error when /proc/self/status has
/// no such field (not Linux).
int64_t resident_bytes();

/// CPU time this process has used so far, user + system, all threads (getrusage), seconds.
double process_cpu_seconds();

/// Peak resident set size (VmHWM) since the process started or a PeakMemoryMeter reset it.
int64_t peak_resident_bytes();

/// Fixes glibc's mmap threshold at `bytes`: every malloc of at least that size is a mapping of
/// its own, returned to the operating system when freed. Fixed, the threshold no longer follows
/// the largest freed mapping (glibc's default rises up to 32 MiB, after which such buffers come
/// from the heap, whose free chunks stay resident). The one place the process's threshold is set.
void fix_mmap_threshold(int64_t bytes);

/// Measures the peak resident memory of the work done while it lives, above the resident
/// memory when it was made. On construction: glibc's mmap threshold is fixed at 64 KiB (fix_mmap_threshold) (so
/// tensors freed later go back to the operating system instead of staying in the heap),
/// freed heap memory is returned (malloc_trim), the kernel's peak (VmHWM) is reset through
/// /proc/self/clear_refs, and VmRSS is read. Not thread safe: one meter at a time per process.
class PeakMemoryMeter {
 public:
  PeakMemoryMeter();
  /// VmHWM now minus VmRSS at construction, bytes (>= 0).
  int64_t peak_increase() const;
  int64_t start_bytes() const { return start_; }

 private:
  int64_t start_ = 0;
};

}  // namespace tessera
