// CpuTensorCacheScope: large CPU buffers come back from the cache, the footprint stays within
// the largest live total, the previous allocator returns, and values do not change.
// CpuRunMemoryScope: buffers malloc'd past LibTorch (as oneDNN's reorders are) leave the
// resident set when freed.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <c10/core/CPUAllocator.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "tessera/core/cpu_tensor_cache.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/unet.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

torch::Tensor mib(int64_t n) { return torch::empty({n * kMiB / 4}); }  // n MiB of floats

TEST(CpuTensorCache, AFreedBufferServesTheNextRequestOfItsSize) {
  CpuTensorCacheScope cache;
  torch::Tensor a = mib(4);
  void* first = a.data_ptr();
  a.reset();
  EXPECT_EQ(CpuTensorCacheScope::stats().cached_bytes, 4 * kMiB);
  torch::Tensor b = mib(4);
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(CpuTensorCacheScope::stats().hits, 1);
  EXPECT_EQ(CpuTensorCacheScope::stats().misses, 1);
  torch::Tensor small = torch::empty({16});  // below min_bytes: not counted
  EXPECT_EQ(CpuTensorCacheScope::stats().live_bytes, 4 * kMiB);
}

// A stream's row buffers change size from strip to strip: a cached buffer up to twice the
// request serves it (live_bytes counts the request), one larger does not.
TEST(CpuTensorCache, ACachedBufferUpToTwiceTheRequestServesIt) {
  CpuTensorCacheScope cache;
  torch::Tensor a = mib(3);
  void* first = a.data_ptr();
  a.reset();
  torch::Tensor b = mib(2);
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(CpuTensorCacheScope::stats().hits, 1);
  EXPECT_EQ(CpuTensorCacheScope::stats().live_bytes, 2 * kMiB);  // the tensor's bytes, not the buffer's
  EXPECT_EQ(CpuTensorCacheScope::stats().cached_bytes, 0);
  b.reset();
  torch::Tensor c = torch::empty({kMiB / 4 + kMiB / 8});  // 1.5 MiB: half the cached 3 MiB
  EXPECT_EQ(c.data_ptr(), first);
  c.reset();
  torch::Tensor d = torch::empty({kMiB / 4 + 1024});  // just over 1 MiB: the 3 MiB is more than twice
  EXPECT_EQ(CpuTensorCacheScope::stats().hits, 2);
  EXPECT_EQ(CpuTensorCacheScope::stats().misses, 2);
}

TEST(CpuTensorCache, TheStreamingPolicyKeepsSmallerBuffersWhileItLives) {
  CpuTensorCacheScope cache;  // the scope's floor: 1 MiB
  const auto kib256 = [] { return torch::empty({64 * 1024}); };  // 256 KiB of floats
  torch::Tensor before = kib256();
  EXPECT_EQ(CpuTensorCacheScope::stats().live_bytes, 0);  // below the floor: malloc's
  {
    const CpuTensorCacheStreaming streaming(64 << 10);
    torch::Tensor a = kib256();
    void* first = a.data_ptr();
    a.reset();
    EXPECT_EQ(CpuTensorCacheScope::stats().cached_bytes, 256 << 10);
    torch::Tensor b = kib256();
    EXPECT_EQ(b.data_ptr(), first);
    EXPECT_EQ(CpuTensorCacheScope::stats().hits, 1);
  }
  const int64_t live = CpuTensorCacheScope::stats().live_bytes;
  torch::Tensor after = kib256();
  EXPECT_EQ(CpuTensorCacheScope::stats().live_bytes, live);  // the scope's floor again
}

// The stream's policy releases the cached buffer returned longest ago, not the largest (which
// the scope's policy releases first), to stay within kStreamCacheSlack × the largest live total.
TEST(CpuTensorCache, TheStreamingPolicyReleasesTheBufferReturnedLongestAgo) {
  CpuTensorCacheScope cache;
  const CpuTensorCacheStreaming streaming(64 << 10);
  torch::Tensor x = mib(8), y = mib(2);  // 10 MiB live at once: the bound is 11 MiB
  void* eight = x.data_ptr();
  y.reset();  // returned first
  x.reset();
  torch::Tensor a = torch::empty({kMiB / 2 + kMiB / 8});  // 2.5 MiB: the 8 MiB is too large, a miss
  CpuTensorCacheStats s = CpuTensorCacheScope::stats();
  EXPECT_EQ(s.misses, 3);
  EXPECT_EQ(s.cached_bytes, 8 * kMiB);  // the 2 MiB went; largest first would have kept it
  a.reset();
  torch::Tensor b = mib(8);
  EXPECT_EQ(b.data_ptr(), eight);
}

// Under the stream's policy each buffer is a mapping of its own: one the cache releases is
// unmapped at once (a heap chunk would stay mapped, and resident, inside the heap).
TEST(CpuTensorCache, ABufferTheStreamingPolicyReleasesIsUnmapped) {
  CpuTensorCacheScope cache;
  const CpuTensorCacheStreaming streaming(64 << 10);
  torch::Tensor t = torch::empty({64 * 1024});  // 256 KiB: below glibc's mmap threshold
  t.fill_(1);
  auto* p = static_cast<unsigned char*>(t.data_ptr());
  const long page = sysconf(_SC_PAGESIZE);
  void* first_page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) / page * page);
  unsigned char resident = 0;
  ASSERT_EQ(mincore(first_page, size_t(page), &resident), 0);
  t.reset();
  torch::Tensor big = mib(1);  // more than twice 256 KiB: a miss past the bound (1.1 MiB) releases it
  EXPECT_EQ(CpuTensorCacheScope::stats().cached_bytes, 0);
  EXPECT_EQ(mincore(first_page, size_t(page), &resident), -1);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(CpuTensorCache, LivePlusCachedNeverExceedsTheLargestLiveTotal) {
  CpuTensorCacheScope cache;
  mib(8);  // allocated and freed: 8 MiB cached, peak live 8 MiB
  torch::Tensor big = mib(16);  // a miss: the 8 cached go first
  CpuTensorCacheStats s = CpuTensorCacheScope::stats();
  EXPECT_EQ(s.cached_bytes, 0);
  EXPECT_EQ(s.live_bytes, 16 * kMiB);
  big.reset();
  torch::Tensor a = mib(6), b = mib(6);  // 12 MiB live; the cached 16 MiB is too large to serve them
  s = CpuTensorCacheScope::stats();
  EXPECT_LE(s.live_bytes + s.cached_bytes, s.peak_live_bytes);
  EXPECT_EQ(s.peak_live_bytes, 16 * kMiB);
  EXPECT_EQ(s.live_bytes, 12 * kMiB);
}

TEST(CpuTensorCache, TheScopeRestoresTheAllocatorAndIsOneAtATime) {
  c10::Allocator* before = c10::GetCPUAllocator();
  torch::Tensor kept;
  {
    CpuTensorCacheScope cache;
    EXPECT_NE(c10::GetCPUAllocator(), before);
    EXPECT_THROW(CpuTensorCacheScope second, Error);
    kept = mib(2);
  }
  EXPECT_EQ(c10::GetCPUAllocator(), before);
  kept.fill_(1);  // still valid after the scope; freed directly when it goes
  EXPECT_EQ(kept.sum().item<float>(), float(2 * kMiB / 4));
}

TEST(CpuTensorCache, ReusedBuffersGiveTheSameForwardBitForBit) {
  torch::manual_seed(4);
  UNet net(unet_preset("unet-tiny").with_base_filters(8));
  net->use_channels_last();
  torch::NoGradGuard ng;
  const torch::Tensor x = torch::randn({1, 4, 188, 188});
  const torch::Tensor want = net->forward(x);
  CpuTensorCacheScope cache;
  for (int k = 0; k < 3; ++k)  // from the second pass on, every large buffer is a reused one
    EXPECT_TRUE(torch::equal(net->forward(x), want)) << "pass " << k;
  EXPECT_GT(CpuTensorCacheScope::stats().hits, 0);
}

// A buffer the cache freed when its scope ended is forgotten with it: malloc hands its address
// to later buffers, and a later scope must not take one of those (a small one, not its to cache)
// for the old large buffer — it would cache it under the old size and serve it to a request of
// that size, which then writes past its end (the heap corruption of `tessera train --auto`
// after its steps: the validation inference's scope, or the next fold's).
TEST(CpuTensorCache, ABufferFreedWhenTheScopeEndedIsForgotten) {
  constexpr int kBuffers = 64;
  const auto make = [] {
    std::vector<torch::Tensor> v;
    for (int k = 0; k < kBuffers; ++k) v.push_back(torch::empty({1024}));  // 4 KiB each
    return v;
  };
  std::set<void*> first;
  {
    CpuTensorCacheScope cache(1);  // every buffer cached, then freed when the scope ends
    for (const torch::Tensor& t : make()) first.insert(t.data_ptr());
    EXPECT_EQ(CpuTensorCacheScope::stats().cached_bytes, int64_t{kBuffers} * 4096);
  }
  CpuTensorCacheScope cache;  // 1 MiB and up: the 4 KiB buffers are not its to keep
  std::vector<torch::Tensor> again = make();
  int reused = 0;
  for (const torch::Tensor& t : again) reused += int(first.count(t.data_ptr()));
  ASSERT_GT(reused, 0) << "malloc reused none of the freed addresses: the test cannot reach a stale entry";
  again.clear();
  EXPECT_EQ(CpuTensorCacheScope::stats().cached_bytes, 0) << reused << " addresses reused";
}

// Touches every page of an n MiB malloc and frees it: what a oneDNN reorder buffer does.
// (Through a volatile pointer: the compiler may not elide the pair.)
void malloc_touch_free(int64_t n) {
  void* volatile p = std::malloc(size_t(n * kMiB));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, size_t(n * kMiB));
  std::free(p);
}

// Under glibc's dynamic threshold the freed 24 MiB mapping raises the threshold to 24 MiB, the
// 16 MiB buffer then comes from the heap and stays resident after its free (the heap's trim
// threshold rose to 48 MiB with it): the waste `tessera train` showed before the scope.
TEST(CpuRunMemoryScope, FreedBuffersOutsideLibTorchLeaveTheResidentSet) {
  const CpuRunMemoryScope memory(kTrainMmapThreshold);
  const int64_t before = resident_bytes();
  malloc_touch_free(24);
  malloc_touch_free(16);
  EXPECT_LT(resident_bytes() - before, 4 * kMiB);
}

}  // namespace
}  // namespace tessera
