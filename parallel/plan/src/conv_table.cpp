// The measured convolution table: reading clusters/devices/*-deepbench.yaml and the
// interpolation described in conv_table.hpp.
#include "tessera/parallel/plan/conv_table.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <yaml-cpp/yaml.h>

#include "tessera/core/error.hpp"

namespace tessera::parallel {
namespace {

constexpr int kNearest = 4;

bool is_gemm(const std::string& algorithm) {
  return algorithm == "IMPLICIT_GEMM" || algorithm == "IMPLICIT_PRECOMP_GEMM" || algorithm == "GEMM";
}

// One row [W, H, C, N, K, S, R, pad_w, pad_h, stride_w, stride_h, fwd ms, bwd-data ms,
// bwd-weights ms, algorithm] as a point against the measured GPU's `peak`.
ConvPoint point_of(const YAML::Node& row, double peak) {
  if (!row.IsSequence() || row.size() != 15) throw Error("a row must have 15 entries");
  auto i = [&row](size_t k) { return row[k].as<double>(); };
  const double W = i(0), H = i(1), C = i(2), N = i(3), K = i(4), S = i(5), R = i(6);
  const double P = std::floor((H + 2 * i(8) - R) / i(10)) + 1, Q = std::floor((W + 2 * i(7) - S) / i(9)) + 1;
  if (!(P >= 1 && Q >= 1 && C >= 1 && N >= 1 && K >= 1)) throw Error("a row's shape is empty");
  const double flops = 2 * N * K * C * R * S * P * Q;
  ConvPoint p;
  p.log2_gemm = {std::log2(N * P * Q), std::log2(C * R * S), std::log2(K)};
  p.winograd_shape = R == 3 && S == 3 && i(9) == 1 && i(10) == 1;
  p.gemm_algorithm = is_gemm(row[14].as<std::string>());
  for (size_t pass = 0; pass < 3; ++pass) {
    const YAML::Node& t = row[11 + pass];
    const double ms = t.IsNull() ? -1 : t.as<double>();
    p.efficiency[pass] = ms > 0 ? flops / (ms * 1e-3 * peak) : -1;
  }
  return p;
}

std::vector<ConvPoint> points_of(const YAML::Node& rows, double peak, const std::string& key) {
  std::vector<ConvPoint> out;
  if (!rows) return out;
  if (!(peak > 0)) throw Error("'" + key + "' needs " + key + "_flops > 0");
  for (size_t r = 0; r < rows.size(); ++r) {
    try {
      out.push_back(point_of(rows[r], peak));
    } catch (const std::exception& e) {
      throw Error("'" + key + "' row " + std::to_string(r + 1) + ": " + e.what());
    }
  }
  return out;
}

}  // namespace

namespace {

// The points `efficiency` reads for (p, pass, q) and q's GEMM coordinates, each clamped to
// their range (`side`: −1 where it lay below, +1 above, 0 inside).
struct Lookup {
  std::vector<const ConvPoint*> set;
  std::array<double, 3> x{};
  std::array<int, 3> side{};
};

Lookup lookup(const ConvTable& t, Precision p, ConvPass pass, const ConvQuery& q) {
  const std::vector<ConvPoint>& all = p == Precision::kFp32 ? t.fp32 : p == Precision::kFp16 ? t.fp16 : std::vector<ConvPoint>{};
  const size_t k = static_cast<size_t>(pass);
  Lookup l;
  for (const ConvPoint& c : all)
    if (c.efficiency[k] > 0 && (q.winograd_shape ? c.winograd_shape : c.gemm_algorithm)) l.set.push_back(&c);
  if (l.set.empty()) throw Error("convolution table " + t.source + " has no " + to_string(p) + " measurements");
  l.x = {std::log2(std::max(1.0, q.positions)), std::log2(std::max(1.0, q.in_channels * q.taps)),
         std::log2(std::max(1.0, q.out_channels))};
  for (size_t a = 0; a < 3; ++a) {
    double lo = std::numeric_limits<double>::max(), hi = -lo;
    for (const ConvPoint* c : l.set) lo = std::min(lo, c->log2_gemm[a]), hi = std::max(hi, c->log2_gemm[a]);
    l.side[a] = l.x[a] < lo ? -1 : l.x[a] > hi ? 1 : 0;
    l.x[a] = std::clamp(l.x[a], lo, hi);
  }
  return l;
}

}  // namespace

double ConvTable::efficiency(Precision p, ConvPass pass, const ConvQuery& q) const {
  const Lookup l = lookup(*this, p, pass, q);
  const size_t k = static_cast<size_t>(pass);
  std::vector<std::pair<double, double>> by_distance;  // squared distance, efficiency
  for (const ConvPoint* c : l.set) {
    double d2 = 0;
    for (size_t a = 0; a < 3; ++a) d2 += (c->log2_gemm[a] - l.x[a]) * (c->log2_gemm[a] - l.x[a]);
    by_distance.emplace_back(d2, c->efficiency[k]);
  }
  std::sort(by_distance.begin(), by_distance.end());
  if (by_distance.front().first < 1e-12) return by_distance.front().second;
  double sum = 0, weights = 0;
  for (size_t i = 0; i < std::min<size_t>(kNearest, by_distance.size()); ++i) {
    sum += by_distance[i].second / by_distance[i].first;
    weights += 1 / by_distance[i].first;
  }
  return sum / weights;
}

std::array<int, 3> ConvTable::clamped(Precision p, ConvPass pass, const ConvQuery& q) const {
  return lookup(*this, p, pass, q).side;
}

ConvTable load_conv_table(const std::filesystem::path& path) {
  const std::string file = path.string();
  ConvTable t;
  try {
    const YAML::Node root = YAML::LoadFile(file);
    const YAML::Node src = root["source"];
    if (!src || !src["repository"] || !src["path"] || !src["commit"])
      throw Error("'source' must name repository, path and commit");
    t.source = src["repository"].as<std::string>() + " " + src["path"].as<std::string>() + " @ " +
               src["commit"].as<std::string>().substr(0, 12);
    for (const char* key : {"fp32", "fp16"}) {
      const double peak = root[std::string(key) + "_flops"] ? root[std::string(key) + "_flops"].as<double>() : 0;
      (std::string(key) == "fp32" ? t.fp32 : t.fp16) = points_of(root[key], peak, key);
    }
    if (t.fp32.empty()) throw Error("'fp32' holds no measurements");
  } catch (const YAML::Exception& e) {
    throw Error(file + ": " + e.what());
  } catch (const Error& e) {
    throw Error(file + ": " + e.what());
  }
  return t;
}

}  // namespace tessera::parallel
