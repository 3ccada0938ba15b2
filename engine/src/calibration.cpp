#include "tessera/engine/calibration.hpp"

#include <cstdlib>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "tessera/core/error.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::engine {

namespace fs = std::filesystem;

fs::path calibration_path(const std::string& given) {
  if (!given.empty()) return given;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : ".") / ".cache" / "tessera" / "calibration.json";
}

nlohmann::json read_calibration(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": not a calibration file (" + e.what() + ")");
  }
}

void write_calibration(const fs::path& path, const nlohmann::json& j) {
  write_file_atomically(path.string(), {j.dump(2), "\n"});  // makes the folder too
}

ModelCalibration model_calibration(const nlohmann::json& j, const fs::path& path, const std::string& preset,
                                   const UNetOptions& options) {
  ModelCalibration c;
  if (!j.contains("models") || !j["models"].contains(preset)) return c;
  const auto& m = j["models"][preset];
  if (m.contains("model") && m["model"] != nlohmann::json(options)) {
    c.other_options = path.string() + " has " + preset + " measured with other options (" + m["model"].dump() +
                      "); run tessera plan --calibrate with these";
    return c;
  }
  try {
    if (m.contains("device_flops")) c.device_flops = m.at("device_flops").get<double>();
    if (m.contains("memory")) {
      c.memory.constant_bytes = m["memory"].at("constant_bytes").get<std::vector<double>>();
      c.memory.bytes_per_element = m["memory"].at("bytes_per_element").get<std::vector<double>>();
      if (c.memory.constant_bytes.size() != c.memory.bytes_per_element.size())
        throw Error(path.string() + ": models." + preset + ".memory: constant_bytes and bytes_per_element differ in length");
    }
    if (m.contains("time")) c.time.seconds_per_unit = m["time"].at("seconds_per_unit").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": models." + preset + ": " + e.what());
  }
  return c;
}

CalibratedCluster load_calibrated_cluster(const std::string& cluster_path, const ModelCalibration& cal,
                                          const std::string& preset, const fs::path& calibration) {
  CalibratedCluster out{parallel::load_cluster(cluster_path), {}};
  parallel::DeviceModel& d = out.cluster.device;
  if (!d.fp32_from_calibration) return out;
  out.times = cal.time;
  if (!cal.time.empty())
    std::cerr << fmt::format("layer times: measured by tessera plan --calibrate ({})\n", calibration.string());
  if (cal.device_flops) {
    d.fp32_flops = *cal.device_flops;
    std::cerr << fmt::format("device throughput: {:.1f} GFLOP/s calibrated ({})\n", *cal.device_flops / 1e9,
                             calibration.string());
  } else {
    std::cerr << fmt::format("device throughput: {:.1f} GFLOP/s (no calibration of {} in {}; run tessera plan "
                             "--calibrate --model {})\n",
                             d.fp32_flops / 1e9, preset, calibration.string(), preset);
  }
  return out;
}

}  // namespace tessera::engine
