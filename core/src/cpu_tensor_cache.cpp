#include "tessera/core/cpu_tensor_cache.hpp"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include "tessera/core/error.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera {
namespace {

class CachingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) const override {
    void* p = const_cast<CachingCpuAllocator*>(this)->take(n);
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  // The stream's policy (CpuTensorCacheStreaming) from now on, or the scope's; returns the
  // previous one.
  struct Policy {
    int64_t min_bytes = 0;
    bool streaming = false;
  };
  Policy set_policy(Policy p) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Policy previous{int64_t(min_bytes_), streaming_};
    min_bytes_ = size_t(std::max<int64_t>(1, p.min_bytes));
    streaming_ = p.streaming;
    return previous;
  }

  void start(int64_t min_bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (active_) throw Error("CpuTensorCacheScope: one at a time");
    active_ = true;
    min_bytes_ = size_t(std::max<int64_t>(1, min_bytes));
    stats_ = {};
    held_ = peak_held_ = 0;
    for (auto& [p, b] : buffers_) b.requested = 0;  // live from an earlier scope: not counted
  }
  void stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    active_ = false;
    // Forgotten as they are freed: malloc may hand their addresses to any later buffer, which
    // give_back must not mistake for one of these (cached under the old size, then served to a
    // request of that size: a write past the new buffer's end).
    for (auto& [size, p] : free_) {
      release_buffer(p, buffers_.at(p));
      buffers_.erase(p);
    }
    free_.clear();
    stats_.cached_bytes = 0;
  }
  CpuTensorCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  static CachingCpuAllocator& instance() {
    static CachingCpuAllocator a;
    return a;
  }

 private:
  static void release(void* p) { instance().give_back(p); }

  void* take(size_t n) {
    if (n == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!active_ || n < min_bytes_) return c10::alloc_cpu(n);
    // The smallest cached buffer of this size or larger, up to twice as large. A stream's
    // buffers change size by a few rows from strip to strip and level to level: with an eighth
    // as the bound, a request took the buffer the next one needed, and the ceiling below then
    // freed cached buffers to map new ones, 11 000 of 79 000 requests a 4096² stream (1.3 M
    // page faults, 2.7 s of kernel time); with twice, 500, and 8 MiB less peak resident
    // (docs/streaming.md). A larger buffer's pages are resident already.
    if (auto it = free_.lower_bound(n); it != free_.end() && it->first <= 2 * n) {
      void* p = it->second;
      stats_.cached_bytes -= int64_t(it->first);
      free_.erase(it);
      ++stats_.hits;
      lend(p, n);
      return p;
    }
    // Keep held + cached within the largest held total so far (or held + this request; the
    // stream: kStreamCacheSlack times that).
    const int64_t bound = std::max(peak_held_, held_ + int64_t(n));
    const int64_t ceiling = streaming_ ? int64_t(kStreamCacheSlack * double(bound)) : bound;
    while (!free_.empty() && held_ + stats_.cached_bytes + int64_t(n) > ceiling) {
      auto victim = streaming_ ? least_recent() : std::prev(free_.end());
      stats_.cached_bytes -= int64_t(victim->first);
      release_buffer(victim->second, buffers_.at(victim->second));
      buffers_.erase(victim->second);
      free_.erase(victim);
    }
    Buffer b;
    b.mapped = streaming_;
    b.size = b.mapped ? page_rounded(n) : n;
    void* p = b.mapped ? map_buffer(b.size) : c10::alloc_cpu(n);
    buffers_[p] = b;
    ++stats_.misses;
    lend(p, n);
    return p;
  }

  // `p`, one of buffers_, now holds a tensor of `n` bytes: live_bytes counts the tensors'
  // bytes (what the memory models predict), held_ the buffers' (what the ceiling bounds).
  void lend(void* p, size_t n) {
    Buffer& b = buffers_.at(p);
    b.requested = n;
    stats_.live_bytes += int64_t(n);
    stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
    held_ += int64_t(b.size);
    peak_held_ = std::max(peak_held_, held_);
  }

  void give_back(void* p) {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = buffers_.find(p);
    if (it == buffers_.end()) return c10::free_cpu(p);  // a small buffer
    Buffer& b = it->second;
    if (b.requested > 0) {
      stats_.live_bytes -= int64_t(b.requested);
      held_ -= int64_t(b.size);
      b.requested = 0;
    }
    if (!active_) {
      release_buffer(p, b);
      buffers_.erase(it);
      return;
    }
    b.returned = ++returns_;
    free_.emplace(b.size, p);
    stats_.cached_bytes += int64_t(b.size);
  }

  std::mutex mutex_;
  bool active_ = false;
  bool streaming_ = false;
  uint64_t returns_ = 0;
  size_t min_bytes_ = size_t{1} << 20;
  struct Buffer {
    size_t size = 0;        // bytes allocated
    size_t requested = 0;   // bytes its tensor asked for while live; 0 cached
    uint64_t returned = 0;  // when it was last cached (returns_ then)
    bool mapped = false;    // a mapping of its own (the stream's policy), else c10::alloc_cpu's
  };

  static size_t page_rounded(size_t n) {
    static const size_t page = size_t(sysconf(_SC_PAGESIZE));
    return (n + page - 1) / page * page;
  }
  static void* map_buffer(size_t n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
  }
  static void release_buffer(void* p, const Buffer& b) {
    if (b.mapped) munmap(p, b.size);
    else c10::free_cpu(p);
  }
  // The cached buffer returned longest ago (the stream's eviction order: a buffer no strip has
  // asked for since is one of a shape the stream has left behind).
  std::multimap<size_t, void*>::iterator least_recent() {
    auto oldest = free_.begin();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (buffers_.at(it->second).returned < buffers_.at(oldest->second).returned) oldest = it;
    return oldest;
  }

  std::multimap<size_t, void*> free_;      // cached buffers by size
  std::unordered_map<void*, Buffer> buffers_;  // every large buffer this allocator made, live or cached
  int64_t held_ = 0, peak_held_ = 0;            // live buffers' bytes, and their largest total
  CpuTensorCacheStats stats_;
};

}  // namespace

CpuTensorCacheScope::CpuTensorCacheScope(int64_t min_bytes) : previous_(c10::GetCPUAllocator()) {
  CachingCpuAllocator& cache = CachingCpuAllocator::instance();
  cache.start(min_bytes);
  c10::SetCPUAllocator(&cache);
}

CpuTensorCacheScope::~CpuTensorCacheScope() {
  c10::SetCPUAllocator(static_cast<c10::Allocator*>(previous_));
  CachingCpuAllocator::instance().stop();
}

namespace {

// The malloc settings come first: the cache's own buffers above the threshold are mappings too.
int64_t with_malloc_settings(int64_t mmap_threshold, int64_t min_bytes) {
  mallopt(M_ARENA_MAX, 1);
  if (mmap_threshold > 0) fix_mmap_threshold(mmap_threshold);
  return min_bytes;
}

}  // namespace

CpuRunMemoryScope::CpuRunMemoryScope(int64_t mmap_threshold, int64_t min_bytes)
    : cache_(with_malloc_settings(mmap_threshold, min_bytes)) {}

CpuTensorCacheStats CpuTensorCacheScope::stats() { return CachingCpuAllocator::instance().stats(); }

CpuTensorCacheStreaming::CpuTensorCacheStreaming(int64_t min_bytes) {
  const auto previous = CachingCpuAllocator::instance().set_policy({min_bytes, true});
  previous_min_bytes_ = previous.min_bytes;
  previous_streaming_ = previous.streaming;
}

CpuTensorCacheStreaming::~CpuTensorCacheStreaming() {
  CachingCpuAllocator::instance().set_policy({previous_min_bytes_, previous_streaming_});
}

}  // namespace tessera
