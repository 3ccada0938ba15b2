#pragma once
// A cache of large CPU tensor buffers, for LibTorch's CPU allocator. Without it, every buffer
// above glibc's mmap threshold (at most 32 MiB) is a fresh mapping: its pages fault in on first
// touch and go back to the kernel when freed, once per layer and tile. unet-small's 1208²
// activations (370 MiB each) cost 4.8 M page faults and 12 s of kernel time in a 45 s
// inference; with the cache the same buffers are reused from tile to tile.
//
// Policy: buffers of at least `min_bytes` are kept when freed and handed out again for a
// request of the same size (up to 1/8 larger); smaller ones go to malloc as before. The
// footprint — live plus cached bytes — never exceeds the largest live total seen so far (or
// live + the request): before a fresh allocation would pass it, cached buffers are released,
// largest first. So resident memory peaks where it did without the cache.
//
// Torch-free header; thread safe (one mutex). Allocation only: values are never affected.
#include <cstdint>

namespace tessera {

struct CpuTensorCacheStats {
  int64_t live_bytes = 0;       ///< large buffers in use
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

}  // namespace tessera
