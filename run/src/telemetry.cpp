#include "tessera/run/telemetry.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>

#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

using nlohmann::json;

// The keys of a telemetry line: written here once, used by the encoder and the decoder.
constexpr const char* kTime = "time";
constexpr const char* kRank = "rank";
constexpr const char* kHost = "host";
constexpr const char* kDevice = "device";
constexpr const char* kPhase = "phase";
constexpr const char* kMemUsed = "mem_used_bytes";
constexpr const char* kMemTotal = "mem_total_bytes";
constexpr const char* kUtil = "util_pct";
constexpr const char* kProcessRss = "process_rss_bytes";
constexpr const char* kProcessCpu = "process_cpu_pct";
constexpr const char* kTemperature = "temperature_c";
constexpr const char* kPower = "power_w";
constexpr const char* kStep = "step";
constexpr const char* kTilesDone = "tiles_done";
constexpr const char* kStage = "pipeline_stage";
constexpr const char* kStageStep = "stage_step_s";
constexpr const char* kStageCompute = "stage_compute_s";
constexpr const char* kStageSent = "stage_bytes_sent";
constexpr const char* kStageReceived = "stage_bytes_received";
constexpr const char* kStagePeak = "stage_peak_bytes";

[[noreturn]] void bad_line(const std::string& why) { throw Error("telemetry line: " + why); }

[[noreturn]] void bad_type(const char* key, const char* wanted, const json& value) {
  bad_line(std::string("field '") + key + "' must be " + wanted + ", got " + value.type_name());
}

const json* find(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

double number(const json& j, const char* key, double fallback) {
  const json* v = find(j, key);
  if (!v) return fallback;
  if (!v->is_number()) bad_type(key, "a number", *v);
  return v->get<double>();
}

int64_t integer(const json& j, const char* key, int64_t fallback) {
  const json* v = find(j, key);
  if (!v) return fallback;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (!v->is_number()) bad_type(key, "a number", *v);
  const double d = v->get<double>();  // a writer that writes integers as floats
  if (!std::isfinite(d) || std::fabs(d) > 9.0e18) bad_line(std::string("field '") + key + "' is out of range");
  return std::llround(d);
}

std::string text(const json& j, const char* key) {
  const json* v = find(j, key);
  if (!v) return {};
  if (!v->is_string()) bad_type(key, "a string", *v);
  return v->get<std::string>();
}

std::optional<double> optional_number(const json& j, const char* key) {
  if (!find(j, key)) return std::nullopt;
  return number(j, key, 0);
}

// "2026-01-01T00:00:00Z", fractional seconds and a "+hh:mm" / "-hhmm" offset allowed; no
// offset means UTC. Unix seconds, nullopt when it is not such a time.
std::optional<double> parse_iso8601(const std::string& s) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, used = 0;
  double second = 0;
  char sep = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%c%2d:%2d:%lf%n", &year, &month, &day, &sep, &hour, &minute, &second,
                  &used) != 7)
    return std::nullopt;
  if ((sep != 'T' && sep != ' ') || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 ||
      second < 0 || second >= 61)
    return std::nullopt;
  const std::string zone = s.substr(size_t(used));
  int offset_minutes = 0;
  if (!zone.empty() && zone != "Z") {
    int zh = 0, zm = 0;
    char sign = 0, end = 0;
    if (std::sscanf(zone.c_str(), "%c%2d:%2d%c", &sign, &zh, &zm, &end) != 3 &&
        std::sscanf(zone.c_str(), "%c%2d%2d%c", &sign, &zh, &zm, &end) != 3)
      return std::nullopt;
    if ((sign != '+' && sign != '-') || zh > 23 || zm > 59) return std::nullopt;
    offset_minutes = (sign == '-' ? -1 : 1) * (zh * 60 + zm);
  }
  std::tm t{};
  t.tm_year = year - 1900;
  t.tm_mon = month - 1;
  t.tm_mday = day;
  t.tm_hour = hour;
  t.tm_min = minute;
  return double(timegm(&t)) + second - 60.0 * offset_minutes;
}

double time_of(const json& j) {
  const json* v = find(j, kTime);
  if (!v) bad_line(std::string("no '") + kTime + "' field");
  if (v->is_number()) return v->get<double>();
  if (!v->is_string()) bad_type(kTime, "Unix seconds or an ISO-8601 string", *v);
  const std::optional<double> t = parse_iso8601(v->get<std::string>());
  if (!t) bad_line(std::string("field '") + kTime + "' is not an ISO-8601 time: \"" + v->get<std::string>() + "\"");
  return *t;
}

int rank_of(const json& j) {
  if (!find(j, kRank)) bad_line(std::string("no '") + kRank + "' field");
  const int64_t rank = integer(j, kRank, -1);
  if (rank < -1 || rank > std::numeric_limits<int>::max()) bad_line(std::string("field '") + kRank + "' is out of range");
  return int(rank);
}

PipelineStageTelemetry stage_of(const json& j) {
  PipelineStageTelemetry p;
  p.stage = int(integer(j, kStage, -1));
  p.step_seconds = number(j, kStageStep, 0);
  p.compute_seconds = number(j, kStageCompute, 0);
  p.bytes_sent = integer(j, kStageSent, 0);
  p.bytes_received = integer(j, kStageReceived, 0);
  p.peak_bytes = integer(j, kStagePeak, 0);
  return p;
}

}  // namespace

std::string encode_telemetry_line(const TelemetrySample& s) {
  json j{{kTime, s.time},
         {kRank, s.rank},
         {kHost, s.host},
         {kDevice, s.device},
         {kPhase, s.phase},
         {kMemUsed, s.mem_used_bytes},
         {kMemTotal, s.mem_total_bytes},
         {kUtil, s.util_pct},
         {kProcessRss, s.process_rss_bytes},
         {kStep, s.step},
         {kTilesDone, s.tiles_done}};
  if (s.process_cpu_pct) j[kProcessCpu] = *s.process_cpu_pct;
  if (s.temperature_c) j[kTemperature] = *s.temperature_c;
  if (s.power_w) j[kPower] = *s.power_w;
  if (const PipelineStageTelemetry& p = s.stage; p.stage >= 0) {
    j[kStage] = p.stage;
    j[kStageStep] = p.step_seconds;
    j[kStageCompute] = p.compute_seconds;
    j[kStageSent] = p.bytes_sent;
    j[kStageReceived] = p.bytes_received;
    j[kStagePeak] = p.peak_bytes;
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

TelemetrySample decode_telemetry_line(std::string_view line) {
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad_line("not JSON: \"" + std::string(line.substr(0, 60)) + (line.size() > 60 ? "…\"" : "\""));
  if (!j.is_object()) bad_line(std::string("not a JSON object but ") + j.type_name());
  TelemetrySample s;
  s.time = time_of(j);
  s.rank = rank_of(j);
  s.host = text(j, kHost);
  s.device = text(j, kDevice);
  s.phase = text(j, kPhase);
  s.mem_used_bytes = integer(j, kMemUsed, 0);
  s.mem_total_bytes = integer(j, kMemTotal, 0);
  s.util_pct = number(j, kUtil, 0);
  s.process_rss_bytes = integer(j, kProcessRss, 0);
  s.process_cpu_pct = optional_number(j, kProcessCpu);
  s.temperature_c = optional_number(j, kTemperature);
  s.power_w = optional_number(j, kPower);
  s.step = integer(j, kStep, 0);
  s.tiles_done = integer(j, kTilesDone, 0);
  s.stage = stage_of(j);
  return s;
}

double telemetry_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace tessera
