// The device probe on this machine: plausible host figures, and a missing NVML (as here, no
// NVIDIA driver) reported instead of failing.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "tessera/run/device_probe.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera {
namespace {

TEST(DeviceProbe, ReadsPlausibleHostFigures) {
  DeviceProbe probe;
  const DeviceReading first = probe.read_host();
  EXPECT_EQ(first.name, "cpu");
  EXPECT_GT(first.mem_total_bytes, int64_t(64) << 20);
  EXPECT_GT(first.mem_used_bytes, 0);
  EXPECT_LE(first.mem_used_bytes, first.mem_total_bytes);
  EXPECT_FALSE(first.temperature_c);
  // Some CPU work between two reads; the share stays a percentage whatever else runs.
  volatile double x = 0;
  for (const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
       std::chrono::steady_clock::now() < end;)
    x = x + std::sqrt(2.0);
  const DeviceReading second = probe.read_host();
  EXPECT_GE(second.util_pct, 0.0);
  EXPECT_LE(second.util_pct, 100.0);
  EXPECT_FALSE(host_name().empty());
  // This process is part of the host's memory in use.
  EXPECT_GT(resident_bytes(), int64_t(1) << 20);
  EXPECT_LE(resident_bytes(), second.mem_total_bytes);
}

TEST(DeviceProbe, GpusThroughNvmlOrAReasonWhyNot) {
  DeviceProbe probe;
  if (probe.gpu_note().empty()) {  // NVML loaded: every GPU it counts can be read
    for (int i = 0; i < probe.gpu_count(); ++i) {
      const auto gpu = probe.read_gpu(i);
      ASSERT_TRUE(gpu) << "gpu " << i;
      EXPECT_GT(gpu->mem_total_bytes, 0);
      EXPECT_LE(gpu->mem_used_bytes, gpu->mem_total_bytes);
    }
  } else {  // no NVML here: no GPU, and a note that says so
    EXPECT_EQ(probe.gpu_count(), 0);
    EXPECT_FALSE(probe.read_gpu(0));
    EXPECT_NE(probe.gpu_note().find("NVML"), std::string::npos) << probe.gpu_note();
  }
  EXPECT_FALSE(probe.read_gpu(-1));
  const DeviceProbe cpu_only(/*use_gpus=*/false);
  EXPECT_EQ(cpu_only.gpu_count(), 0);
  EXPECT_FALSE(cpu_only.read_gpu(0));
  EXPECT_FALSE(cpu_only.gpu_note().empty());
}

}  // namespace
}  // namespace tessera
