#pragma once
// A described cluster for the simulator (parallel/simulator.hpp): one device model, how many
// devices share a node and how they talk inside it, and the network between nodes. Read from
// the YAML files in clusters/ (load_cluster); every number there carries its source.
//
// Units: FLOP/s, bytes, bytes per second, seconds. Bandwidths are per direction. Torch-free
// plain values; thread safe once built.
#include <cstdint>
#include <filesystem>
#include <string>

#include "tessera/core/precision.hpp"
#include "tessera/parallel/plan/conv_table.hpp"

namespace tessera::parallel {

/// Convolution throughput as a fraction of peak against the work one kernel launch sees:
///   eff(n) = e_max · n / (n + n_half),  n = batch × output positions (side^D),
///   n_half = half_side² (the 2-D side at which a convolution reaches half of e_max).
/// In 2-D with batch 1 this is e_max · side² / (side² + half_side²).
struct EfficiencyCurve {
  double max = 0.5;        ///< e_max: sustained fraction of peak on large maps
  double half_side = 64;   ///< s_half in pixels (2-D equivalent)

  double at(double positions) const;  ///< eff(n) for n output positions
  void validate() const;              ///< throws tessera::Error naming efficiency.*
};

/// One accelerator (or one CPU "device": a rank's share of the cores).
struct DeviceModel {
  std::string name = "device";
  double fp32_flops = 50e9;     ///< peak FP32 FLOP/s
  double fp16_flops = 0;        ///< peak FP16 FLOP/s (tensor cores); 0: not supported
  double bf16_flops = 0;        ///< peak BF16 FLOP/s; 0: not supported
  int64_t memory_bytes = int64_t{16} << 30;
  double memory_bytes_per_second = 10e9;  ///< element-wise layers' traffic (HBM / DRAM)
  int64_t baseline_bytes = int64_t{256} << 20;  ///< per process: runtime, context, allocator
  double launch_seconds = 10e-6;  ///< α_launch: host overhead per layer and pass (forward 1, backward 2)
  EfficiencyCurve efficiency;  ///< convolutions when `convolutions` is empty (an assumed curve)
  ConvTable convolutions;      ///< measured convolution kernels (conv_table.hpp); empty: the curve
  /// True when fp32_flops should be replaced by `tessera plan --calibrate`'s sustained FLOP/s
  /// (the CLI does it; the efficiency curve then applies on top of a measured rate).
  bool fp32_from_calibration = false;

  double peak_flops(Precision p) const;  ///< throws tessera::Error when the device lacks `p`
  void validate() const;
};

/// Devices per node, the node's internal links and the network between nodes (α-β).
struct ClusterModel {
  std::string name = "cluster";
  DeviceModel device;
  int devices_per_node = 1;
  int nodes = 1;                              ///< nodes the machine has (an upper bound for --nodes)
  double intra_node_bytes_per_second = 50e9;  ///< β inside a node (NVLink, shared memory)
  double intra_node_latency_seconds = 5e-6;   ///< α inside a node
  double inter_node_bytes_per_second = 12.5e9;  ///< β of one node's network injection
  double inter_node_latency_seconds = 5e-6;   ///< α between nodes
  double io_bytes_per_second_per_node = 2e9;  ///< input read rate per node (file system share)

  /// Throws tessera::Error naming the first bad field.
  void validate() const;
};

/// Reads a cluster description (clusters/*.yaml): keys name, nodes, devices_per_node,
/// device {name, fp32_flops (a number or "calibrated"), fp16_flops, bf16_flops, memory_gib,
/// memory_bytes_per_second, baseline_mib, launch_seconds, efficiency {max, half_side},
/// convolutions (a conv table, clusters/devices/*.yaml, relative to this file)},
/// intra_node {bytes_per_second, latency_seconds}, inter_node {…}, io {bytes_per_second_per_node}.
/// Unknown keys and bad values are tessera::Error naming the file and the key.
ClusterModel load_cluster(const std::filesystem::path& path);

/// Ring allreduce of `bytes` over p ranks: 2(p − 1)/p · bytes / β + 2(p − 1) α (0 when p = 1).
double ring_allreduce_seconds(double bytes, int ranks, double bytes_per_second, double latency_seconds);

/// Hierarchical allreduce over `ranks` placed `per_node` to a node: ring reduce-scatter inside
/// each node, ring allreduce between nodes of each GPU's 1/per_node share (the per_node rings
/// share the node's injection bandwidth, so the inter-node term sees the whole `bytes`), ring
/// allgather inside the node.
double hierarchical_allreduce_seconds(double bytes, int ranks, int per_node, const ClusterModel& c);

}  // namespace tessera::parallel
