#include "tessera/core/fault_injection.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

// One parsed TESSERA_TEST_* variable: which rank fails, and where.
struct Fault {
  int rank = 0;
  FaultPoint point = FaultPoint::kStep;
  int64_t index = 0;
};

std::atomic<int> g_rank{0};

int64_t parse_number(const char* variable, const std::string& item, const std::string& value) {
  size_t used = 0;
  int64_t n = -1;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
  }
  if (used != value.size() || n < 0)
    throw Error(std::string(variable) + ": '" + item + "' needs a non-negative integer");
  return n;
}

// "rank=1,step=3" or "rank=1,tile=2"; unset or empty: no fault.
std::optional<Fault> parse(const char* variable) {
  const char* text = std::getenv(variable);
  if (!text || !*text) return std::nullopt;
  Fault f;
  bool where = false;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "rank") {
      f.rank = static_cast<int>(parse_number(variable, item, value));
    } else if (key == "step" || key == "tile") {
      if (where) throw Error(std::string(variable) + ": give one of step= or tile=, not both");
      f.point = key == "step" ? FaultPoint::kStep : FaultPoint::kTile;
      f.index = parse_number(variable, item, value);
      where = true;
    } else {
      throw Error(std::string(variable) + ": unknown item '" + item + "' (expected rank=N and step=N or tile=N)");
    }
  }
  if (!where) throw Error(std::string(variable) + ": '" + text + "' names no step= or tile=");
  return f;
}

const char* point_name(FaultPoint p) { return p == FaultPoint::kStep ? "training step" : "tile"; }

}  // namespace

void set_fault_rank(int world_rank) { g_rank = world_rank; }

void fault_point(FaultPoint point, int64_t index) {
  static const std::optional<Fault> hang = parse("TESSERA_TEST_HANG");
  static const std::optional<Fault> fail = parse("TESSERA_TEST_THROW");
  const int rank = g_rank;
  auto hits = [&](const std::optional<Fault>& f) {
    return f && f->rank == rank && f->point == point && f->index == index;
  };
  const std::string where = "rank " + std::to_string(rank) + ": ";
  if (hits(fail))
    throw Error(where + "injected failure in " + point_name(point) + " " + std::to_string(index) +
                " (TESSERA_TEST_THROW)");
  if (hits(hang)) {
    std::fprintf(stderr, "%sstops answering in %s %lld (TESSERA_TEST_HANG): sleeping until killed\n", where.c_str(),
                 point_name(point), static_cast<long long>(index));
    std::fflush(stderr);
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
}

bool fault_nan_at_step(int64_t step) {
  static const std::optional<Fault> nan = parse("TESSERA_TEST_NAN");
  return nan && nan->point == FaultPoint::kStep && nan->index == step;
}

}  // namespace tessera
