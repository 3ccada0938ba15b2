// Telemetry under mpirun: every rank leaves RUN/telemetry/rank-N.jsonl with the documented
// schema, which the viewer's decoder reads; without NVML the device is the CPU with the host's
// memory in use, this process's RSS and the host's CPU load.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tessera/parallel/modes/device_monitor.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/run/telemetry.hpp"

namespace tessera::parallel {
namespace {

namespace fs = std::filesystem;

TEST(Telemetry, EveryRankWritesSamplesOfTheDocumentedSchema) {
  Communicator& w = world();
  torch::Tensor pid = torch::tensor({int64_t(::getpid())});
  w.broadcast(pid, 0);
  const std::string run = (fs::temp_directory_path() / ("tessera-tm-" + std::to_string(pid.item<int64_t>()))).string();
  const std::clock_t cpu_start = std::clock();
  {
    DeviceMonitorOptions o;
    o.run_dir = run;
    o.rank = w.rank();
    o.period = std::chrono::milliseconds(50);
    DeviceMonitor monitor(o);
    monitor.set_phase("train");
    for (int step = 1; step <= 4; ++step) {
      monitor.set_step(step);
      monitor.set_tiles_done(step * 2);
      // Busy until this process has used 60 ms more CPU time, however loaded the machine is:
      // its own CPU use shows in process_cpu_pct.
      const std::clock_t until = std::clock() + CLOCKS_PER_SEC * 6 / 100;
      volatile double sink = 0;
      while (std::clock() < until) sink = sink + 1.0;
    }
    const DeviceSummary s = monitor.summary();
    EXPECT_GE(s.samples, 3);
    EXPECT_GT(s.peak_mem_used_bytes, 1 << 20);
    EXPECT_GT(s.peak_process_rss_bytes, 1 << 20);
    EXPECT_EQ(s.device, "cpu");
  }
  // This rank's samples integrate to the CPU time the process used (std::clock: another route
  // than the writer's getrusage), whatever share of the cores it got.
  {
    const double cpu_used = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    std::ifstream in(fs::path(run) / "telemetry" / ("rank-" + std::to_string(w.rank()) + ".jsonl"));
    double integral = 0, last_time = -1;
    for (std::string line; std::getline(in, line);) {
      const TelemetrySample t = decode_telemetry_line(line);
      if (t.process_cpu_pct && last_time > 0) integral += *t.process_cpu_pct / 100.0 * (t.time - last_time);
      last_time = t.time;
    }
    EXPECT_GE(cpu_used, 0.24);
    EXPECT_NEAR(integral, cpu_used, 0.25 * cpu_used + 0.02) << "rank " << w.rank() << ": process_cpu_pct over time";
  }
  w.barrier();
  if (w.rank() == 0) {
    for (int r = 0; r < w.size(); ++r) {
      const fs::path file = fs::path(run) / "telemetry" / ("rank-" + std::to_string(r) + ".jsonl");
      ASSERT_TRUE(fs::exists(file)) << file;
      std::ifstream in(file);
      std::string line;
      int lines = 0;
      int64_t last_step = 0;
      while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        for (const char* key : {"time", "rank", "host", "device", "mem_used_bytes", "mem_total_bytes", "util_pct",
                                "phase", "step", "tiles_done"})
          EXPECT_TRUE(j.contains(key)) << key << " missing in " << file;
        EXPECT_EQ(j["rank"].get<int>(), r);
        EXPECT_GT(j["time"].get<double>(), 1.6e9);
        EXPECT_LE(j["mem_used_bytes"].get<int64_t>(), j["mem_total_bytes"].get<int64_t>());
        EXPECT_GE(j["util_pct"].get<double>(), 0.0);
        EXPECT_LE(j["util_pct"].get<double>(), 100.0);
        EXPECT_GE(j["step"].get<int64_t>(), last_step);
        last_step = j["step"].get<int64_t>();
        // The viewer's decoder reads what the writer wrote.
        const TelemetrySample sample = decode_telemetry_line(line);
        EXPECT_EQ(sample.rank, r);
        EXPECT_EQ(sample.device, "cpu");
        EXPECT_EQ(sample.step, last_step);
        EXPECT_GT(sample.process_rss_bytes, 1 << 20);
        EXPECT_LE(sample.process_rss_bytes, sample.mem_total_bytes);
        // Every sample after the first has this process's CPU use; the busy loop shows.
        EXPECT_EQ(sample.process_cpu_pct.has_value(), lines > 0) << line;
        ++lines;
      }
      EXPECT_GE(lines, 3) << file;
      EXPECT_EQ(last_step, 4);
    }
    fs::remove_all(run);
  }
  w.barrier();
}

}  // namespace
}  // namespace tessera::parallel
