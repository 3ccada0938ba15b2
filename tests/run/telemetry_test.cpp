// The telemetry line is the seam between the writer (parallel::DeviceMonitor) and the reader
// (tessera-view): every field survives the codec, and a broken line is rejected with a reason.
#include <gtest/gtest.h>

#include <string>

#include "tessera/core/error.hpp"
#include "tessera/run/telemetry.hpp"

namespace tessera {
namespace {

TelemetrySample every_field_set() {
  TelemetrySample s;
  s.time = 1767225600.125;
  s.rank = 7;
  s.host = "node-12";
  s.device = "cuda:3";
  s.phase = "train";
  s.mem_used_bytes = 12345678901;
  s.mem_total_bytes = 42949672960;
  s.util_pct = 87.5;
  s.process_rss_bytes = 987654321;
  s.process_cpu_pct = 143.5;
  s.temperature_c = 71;
  s.power_w = 251.25;
  s.step = 1234567;
  s.tiles_done = 4321;
  s.stage = {2, 0.75, 0.5, 111111111, 222222222, 333333333};
  return s;
}

// The message of the error `f` throws, or "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

TEST(TelemetryCodec, RoundTripsEveryField) {
  const TelemetrySample in = every_field_set();
  const std::string line = encode_telemetry_line(in);
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one sample, one line";
  const TelemetrySample out = decode_telemetry_line(line);
  EXPECT_EQ(out.time, in.time);
  EXPECT_EQ(out.rank, in.rank);
  EXPECT_EQ(out.host, in.host);
  EXPECT_EQ(out.device, in.device);
  EXPECT_EQ(out.phase, in.phase);
  EXPECT_EQ(out.mem_used_bytes, in.mem_used_bytes);
  EXPECT_EQ(out.mem_total_bytes, in.mem_total_bytes);
  EXPECT_EQ(out.util_pct, in.util_pct);
  EXPECT_EQ(out.process_rss_bytes, in.process_rss_bytes);
  EXPECT_EQ(out.process_cpu_pct, in.process_cpu_pct);
  EXPECT_EQ(out.temperature_c, in.temperature_c);
  EXPECT_EQ(out.power_w, in.power_w);
  EXPECT_EQ(out.step, in.step);
  EXPECT_EQ(out.tiles_done, in.tiles_done);
  EXPECT_EQ(out.stage.stage, in.stage.stage);
  EXPECT_EQ(out.stage.step_seconds, in.stage.step_seconds);
  EXPECT_EQ(out.stage.compute_seconds, in.stage.compute_seconds);
  EXPECT_EQ(out.stage.bytes_sent, in.stage.bytes_sent);
  EXPECT_EQ(out.stage.bytes_received, in.stage.bytes_received);
  EXPECT_EQ(out.stage.peak_bytes, in.stage.peak_bytes);
}

TEST(TelemetryCodec, LeavesOutUnsetOptionalFieldsAndKeepsTheDocumentedKeys) {
  TelemetrySample s = every_field_set();
  s.temperature_c.reset();
  s.power_w.reset();
  s.process_cpu_pct.reset();
  s.stage = {};
  const std::string line = encode_telemetry_line(s);
  for (const char* key : {"\"time\"", "\"rank\"", "\"host\"", "\"device\"", "\"mem_used_bytes\"", "\"mem_total_bytes\"",
                          "\"util_pct\"", "\"phase\"", "\"step\"", "\"tiles_done\""})
    EXPECT_NE(line.find(key), std::string::npos) << key << " missing: " << line;
  for (const char* key : {"temperature_c", "power_w", "process_cpu_pct", "pipeline_stage", "stage_step_s"})
    EXPECT_EQ(line.find(key), std::string::npos) << key << " written although unset: " << line;
  const TelemetrySample back = decode_telemetry_line(line);
  EXPECT_FALSE(back.temperature_c);
  EXPECT_FALSE(back.power_w);
  EXPECT_FALSE(back.process_cpu_pct);
  EXPECT_EQ(back.stage.stage, -1);
}

TEST(TelemetryCodec, ReadsForeignLinesWithDefaultsAndIsoTimes) {
  const TelemetrySample s = decode_telemetry_line(R"({"time": "2026-01-01T01:00:00.5+01:00", "rank": 0, "extra": [1]})");
  EXPECT_DOUBLE_EQ(s.time, 1767225600.5);
  EXPECT_EQ(s.mem_used_bytes, 0);
  EXPECT_EQ(s.stage.stage, -1);
  EXPECT_EQ(decode_telemetry_line(R"({"time": 5, "rank": 1, "mem_used_bytes": 2.0e9})").mem_used_bytes, 2000000000);
}

TEST(TelemetryCodec, RejectsABrokenLineNamingTheProblem) {
  auto problem = [](const std::string& line) { return error_of([&] { decode_telemetry_line(line); }); };
  EXPECT_NE(problem(R"({"time": 1, "rank": )").find("not JSON"), std::string::npos);
  EXPECT_NE(problem("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(problem(R"({"rank": 0})").find("no 'time' field"), std::string::npos);
  EXPECT_NE(problem(R"({"time": 1})").find("no 'rank' field"), std::string::npos);
  EXPECT_NE(problem(R"({"time": 1, "rank": "zero"})").find("field 'rank' must be a number, got string"), std::string::npos);
  EXPECT_NE(problem(R"({"time": 1, "rank": 0, "host": 5})").find("field 'host' must be a string"), std::string::npos);
  EXPECT_NE(problem(R"({"time": 1, "rank": 0, "stage_bytes_sent": "many"})").find("'stage_bytes_sent'"), std::string::npos);
  EXPECT_NE(problem(R"({"time": "yesterday", "rank": 0})").find("not an ISO-8601 time"), std::string::npos);
  for (const std::string line : {R"({"time": 1, "rank": )", "garbage", R"({"rank": 0})"})
    EXPECT_EQ(problem(line).rfind("telemetry line: ", 0), 0u) << problem(line);
}

}  // namespace
}  // namespace tessera
