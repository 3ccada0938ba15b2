#pragma once
// A cache of large CPU tensor buffers, for LibTorch's CPU allocator. Without it, every buffer
// above glibc's mmap threshold (at most 32 MiB) is a fresh mapping: its pages fault in on first
// touch and go back to the kernel when freed, once per layer and tile. unet-small's 1208²
// activations (370 MiB each) cost 4.8 M page faults and 12 s of kernel time in a 45 s
// inference; with the cache the same buffers are reused from tile to tile.
//
// Policy: buffers of at least `min_bytes` are kept when freed and handed out again for a
// request of their size or up to half of it (the smallest that fits); smaller ones go to malloc
// as before. The footprint — the live buffers plus the cached ones — never exceeds the largest
// live-buffer total seen so far (or that + the request): before a fresh allocation would pass
// it, cached buffers are released, largest first (a stream's policy differs:
// CpuTensorCacheStreaming below). So resident memory peaks about where it did without the cache.
//
// Torch-free header; thread safe (one mutex). Allocation only: values are never affected.
#include <cstdint>

namespace tessera {

struct CpuTensorCacheStats {
  int64_t live_bytes = 0;       ///< bytes the live large tensors asked for (their buffers may be up to 2x)
  int64_t cached_bytes = 0;     ///< large buffers freed and kept
  int64_t peak_live_bytes = 0;  ///< the largest live_bytes so far
  int64_t hits = 0, misses = 0; ///< large requests served from the cache / freshly allocated
};

/// While a scope lives, LibTorch's CPU allocator is the cache; its destructor restores the
/// previous allocator and releases the cached buffers (buffers still live are freed directly
/// when their tensors go). One scope at a time (checked).
class CpuTensorCacheScope {
 public:
  explicit CpuTensorCacheScope(int64_t min_bytes = int64_t{1} << 20);
  ~CpuTensorCacheScope();
  CpuTensorCacheScope(const CpuTensorCacheScope&) = delete;
  CpuTensorCacheScope& operator=(const CpuTensorCacheScope&) = delete;
  static CpuTensorCacheStats stats();

 private:
  void* previous_;  ///< c10::Allocator* restored at the end
};

/// While it lives, the cache (when a scope is active) runs the stream's policy; the previous
/// one returns at its end. A stream's row buffers are many and mostly between 64 KiB and 1 MiB
/// (a row of 16 channels 2048 wide is 128 KiB), reused from strip to strip:
/// - buffers from `min_bytes` up are kept, instead of the scope's floor;
/// - each new one is a mapping of its own, never a chunk of malloc's heap: one the cache
///   releases goes back to the kernel at once instead of leaving a hole among the heap's
///   long-lived allocations (oneDNN's kernels, GDAL's blocks), which is what the cache's
///   footprint bound alone cannot see (4096², unet-tiny: 15 MiB less peak RSS,
///   docs/streaming.md);
/// - the footprint bound is kStreamCacheSlack × the largest live-buffer total, and the cached
///   buffers released to keep it are those returned longest ago, not the largest: a buffer no
///   strip asked for since is one of a shape the stream has left behind (its first strips'),
///   while the largest is often the next strip's.
class CpuTensorCacheStreaming {
 public:
  explicit CpuTensorCacheStreaming(int64_t min_bytes);
  ~CpuTensorCacheStreaming();
  CpuTensorCacheStreaming(const CpuTensorCacheStreaming&) = delete;
  CpuTensorCacheStreaming& operator=(const CpuTensorCacheStreaming&) = delete;

 private:
  int64_t previous_min_bytes_ = 0;
  bool previous_streaming_ = false;
};

/// The stream's footprint bound over the largest live-buffer total. The strips' requests do not
/// fit the cached buffers exactly (a request takes one up to twice its size), so at 1.0 a
/// 4096² stream still maps 4 500 of its 79 000 buffers afresh (1.8 s of kernel time); at 1.1,
/// 2 100 (0.9 s), for 2 MiB more (docs/streaming.md).
inline constexpr double kStreamCacheSlack = 1.1;

/// The CPU memory policy of a network run, shared by `tessera infer` and `tessera train`:
/// - one malloc arena, so buffers a reader thread frees (windows, batches) are reused by the
///   network instead of pinning a second arena's pages (measured in infer: −15 % peak RSS);
/// - with `mmap_threshold` > 0 (train: kTrainMmapThreshold), glibc's mmap threshold fixed there
///   (run/process_memory.hpp), so larger allocations that bypass LibTorch's allocator — oneDNN's
///   reorders between plain and blocked layouts, over a hundred a training step — are mappings
///   of their own, returned when freed, instead of heap chunks under glibc's dynamic threshold
///   (up to 32 MiB) whose free pages stay resident: a third above the step's tensors at
///   unet-tiny 512² (docs/measured-results.md). 0 keeps glibc's dynamic threshold (infer:
///   within a few % of its model without; streaming's many strips would map buffers afresh);
/// - the tensor cache for LibTorch's buffers of at least `min_bytes` (reused, not re-faulted).
/// The malloc settings last for the rest of the process; the cache ends with the scope.
class CpuRunMemoryScope {
 public:
  explicit CpuRunMemoryScope(int64_t mmap_threshold, int64_t min_bytes = int64_t{1} << 20);

 private:
  CpuTensorCacheScope cache_;
};

/// Training's mmap threshold: 1 MiB, the tensor cache's floor. Measured (docs/measured-results.md,
/// `tessera train` itself, loaded host): at 4 MiB the 4 × 1 split's ranks keep 45 MiB more (23 %
/// under the planner instead of 14 %), at 8 MiB one rank at 512² 55 MiB more. The price: small
/// tiles pay a fresh mapping per oneDNN buffer above it (unet-tiny 48², dp 2: 16 steps in
/// 6.9–7.0 s against 4.8–5.3 s with glibc's dynamic threshold, where 512² keeps a third more).
constexpr int64_t kTrainMmapThreshold = int64_t{1} << 20;

/// Training's threshold for steps whose full-resolution feature map (one micro-batch's tiles ×
/// the first level's filters, float) is `level0_bytes`: kTrainMmapThreshold from 16 MiB up
/// (unet-tiny 512²: a fixed threshold cost no measurable time and saved a third of the
/// resident peak), 0 below (unet-tiny 48², dp 2: 35–40 % slower fixed, for a few MiB kept).
inline int64_t train_mmap_threshold(int64_t level0_bytes) {
  return level0_bytes >= (int64_t{16} << 20) ? kTrainMmapThreshold : 0;
}

/// One micro-batch's full-resolution feature map in bytes: `tiles` tiles of `side`^dims × the
/// first level's `base_filters`, float. What train_mmap_threshold decides on, for `tessera
/// train` (its tile), `plan --calibrate` and `bench pipeline` (timed as train runs).
inline int64_t level0_bytes(int64_t tiles, int64_t base_filters, int dims, int64_t side) {
  int64_t n = tiles * base_filters * 4;
  for (int d = 0; d < dims; ++d) n *= side;
  return n;
}
}  // namespace tessera
