// Cluster descriptions: validation, the YAML reader (yaml-cpp stays in this file) and the
// collective cost formulas.
#include "tessera/parallel/plan/cluster.hpp"

#include <cmath>
#include <functional>
#include <map>

#include <yaml-cpp/yaml.h>

#include "tessera/core/error.hpp"

namespace tessera::parallel {

double EfficiencyCurve::at(double positions) const {
  const double n_half = half_side * half_side;
  return max * positions / (positions + n_half);
}

void EfficiencyCurve::validate() const {
  if (!(max > 0 && max <= 1)) throw Error("efficiency.max must be in (0, 1], got " + std::to_string(max));
  if (!(half_side >= 0)) throw Error("efficiency.half_side must be >= 0, got " + std::to_string(half_side));
}

double DeviceModel::peak_flops(Precision p) const {
  const double f = p == Precision::kFp32 ? fp32_flops : p == Precision::kFp16 ? fp16_flops : bf16_flops;
  if (!(f > 0)) throw Error("device " + name + " has no " + to_string(p) + " throughput (device." + to_string(p) + "_flops)");
  return f;
}

void DeviceModel::validate() const {
  auto positive = [](const char* field, double v) {
    if (!(v > 0)) throw Error(std::string("device.") + field + " must be > 0, got " + std::to_string(v));
  };
  positive("fp32_flops", fp32_flops);
  positive("memory_gib", static_cast<double>(memory_bytes));
  positive("memory_bytes_per_second", memory_bytes_per_second);
  if (fp16_flops < 0 || bf16_flops < 0) throw Error("device.fp16_flops / bf16_flops must be >= 0");
  if (baseline_bytes < 0) throw Error("device.baseline_mib must be >= 0");
  if (launch_seconds < 0) throw Error("device.launch_seconds must be >= 0");
  efficiency.validate();
}

void ClusterModel::validate() const {
  device.validate();
  if (devices_per_node < 1) throw Error("devices_per_node must be >= 1, got " + std::to_string(devices_per_node));
  if (nodes < 1) throw Error("nodes must be >= 1, got " + std::to_string(nodes));
  auto positive = [](const char* field, double v) {
    if (!(v > 0)) throw Error(std::string(field) + " must be > 0, got " + std::to_string(v));
  };
  positive("intra_node.bytes_per_second", intra_node_bytes_per_second);
  positive("inter_node.bytes_per_second", inter_node_bytes_per_second);
  positive("io.bytes_per_second_per_node", io_bytes_per_second_per_node);
  if (intra_node_latency_seconds < 0 || inter_node_latency_seconds < 0) throw Error("latency_seconds must be >= 0");
}

namespace {

// A mapping's keys, each handled by one setter; any other key is an error naming it.
using Setters = std::map<std::string, std::function<void(const YAML::Node&, const std::string& key)>>;

void read_map(const YAML::Node& node, const std::string& where, const Setters& setters) {
  if (!node.IsMap()) throw Error(where + ": expected a mapping");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const std::string path = where.empty() ? key : where + "." + key;
    auto it = setters.find(key);
    if (it == setters.end()) throw Error("unknown key '" + path + "'");
    try {
      it->second(kv.second, path);
    } catch (const YAML::Exception& e) {
      throw Error("'" + path + "': " + e.msg);
    }
  }
}

template <typename T>
std::function<void(const YAML::Node&, const std::string&)> set(T& field) {
  return [&field](const YAML::Node& n, const std::string&) { field = n.as<T>(); };
}

}  // namespace

ClusterModel load_cluster(const std::filesystem::path& path) {
  ClusterModel c;
  DeviceModel& d = c.device;
  const std::string file = path.string();
  try {
    YAML::Node root = YAML::LoadFile(file);
    double memory_gib = static_cast<double>(d.memory_bytes) / (1 << 30);
    double baseline_mib = static_cast<double>(d.baseline_bytes) / (1 << 20);
    auto fp32 = [&d](const YAML::Node& n, const std::string&) {
      if (n.IsScalar() && n.as<std::string>() == "calibrated") {
        d.fp32_from_calibration = true;
      } else {
        d.fp32_flops = n.as<double>();
      }
    };
    auto link = [](double& bw, double& alpha) {
      return [&bw, &alpha](const YAML::Node& n, const std::string& where) {
        read_map(n, where, {{"bytes_per_second", set(bw)}, {"latency_seconds", set(alpha)}});
      };
    };
    Setters device{{"name", set(d.name)},
                   {"fp32_flops", fp32},
                   {"fallback_fp32_flops", set(d.fp32_flops)},
                   {"fp16_flops", set(d.fp16_flops)},
                   {"bf16_flops", set(d.bf16_flops)},
                   {"memory_gib", set(memory_gib)},
                   {"memory_bytes_per_second", set(d.memory_bytes_per_second)},
                   {"baseline_mib", set(baseline_mib)},
                   {"launch_seconds", set(d.launch_seconds)},
                   {"convolutions", [&d, &path](const YAML::Node& n, const std::string&) {
                      d.convolutions = load_conv_table(path.parent_path() / n.as<std::string>());
                    }},
                   {"efficiency", [&d](const YAML::Node& n, const std::string& where) {
                      read_map(n, where, {{"max", set(d.efficiency.max)}, {"half_side", set(d.efficiency.half_side)}});
                    }}};
    read_map(root, "",
             {{"name", set(c.name)},
              {"nodes", set(c.nodes)},
              {"devices_per_node", set(c.devices_per_node)},
              {"device", [&device](const YAML::Node& n, const std::string& where) { read_map(n, where, device); }},
              {"intra_node", link(c.intra_node_bytes_per_second, c.intra_node_latency_seconds)},
              {"inter_node", link(c.inter_node_bytes_per_second, c.inter_node_latency_seconds)},
              {"io", [&c](const YAML::Node& n, const std::string& where) {
                 read_map(n, where, {{"bytes_per_second_per_node", set(c.io_bytes_per_second_per_node)}});
               }}});
    d.memory_bytes = static_cast<int64_t>(memory_gib * (1 << 30));
    d.baseline_bytes = static_cast<int64_t>(baseline_mib * (1 << 20));
    c.validate();
  } catch (const YAML::Exception& e) {
    throw Error(file + ": " + e.what());
  } catch (const Error& e) {
    throw Error(file + ": " + e.what());
  }
  return c;
}

double ring_allreduce_seconds(double bytes, int ranks, double bytes_per_second, double latency_seconds) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double p = ranks;
  return 2 * (p - 1) / p * bytes / bytes_per_second + 2 * (p - 1) * latency_seconds;
}

double hierarchical_allreduce_seconds(double bytes, int ranks, int per_node, const ClusterModel& c) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const int g = std::max(1, std::min(per_node, ranks));
  const int nodes = (ranks + g - 1) / g;
  const double intra = ring_allreduce_seconds(bytes, g, c.intra_node_bytes_per_second, c.intra_node_latency_seconds);
  const double inter = ring_allreduce_seconds(bytes, nodes, c.inter_node_bytes_per_second, c.inter_node_latency_seconds);
  // The g inter-node rings each move bytes / g but share the node's injection bandwidth, so
  // their bandwidth term is that of one ring over the whole buffer; their latencies overlap.
  return intra + inter;
}

}  // namespace tessera::parallel
