// The simulator's parts against hand-computed values.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tessera/core/error.hpp"
#include "tessera/parallel/plan/cluster.hpp"
#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::parallel {
namespace {

const std::filesystem::path kClusters = std::filesystem::path(TESSERA_SOURCE_DIR) / "clusters";

TEST(Collectives, RingAllreduceIsTwoPMinusOneOverPBytesOverBandwidthPlusLatencies) {
  // 2 · 3/4 · 1 GB / 10 GB/s + 2 · 3 · 10 µs
  EXPECT_NEAR(ring_allreduce_seconds(1e9, 4, 10e9, 10e-6), 0.15 + 60e-6, 1e-12);
  EXPECT_EQ(ring_allreduce_seconds(1e9, 1, 10e9, 10e-6), 0.0);
}

TEST(Collectives, HierarchicalAllreduceIsARingInsideNodesThenOneBetweenThem) {
  ClusterModel c;
  c.devices_per_node = 6;
  c.intra_node_bytes_per_second = 50e9;
  c.intra_node_latency_seconds = 2e-6;
  c.inter_node_bytes_per_second = 25e9;
  c.inter_node_latency_seconds = 5e-6;
  // 12 ranks, 6 per node: a 6-ring at NVLink, a 2-ring between the nodes.
  const double intra = 2.0 * 5 / 6 * 1e9 / 50e9 + 2 * 5 * 2e-6;
  const double inter = 2.0 * 1 / 2 * 1e9 / 25e9 + 2 * 1 * 5e-6;
  EXPECT_NEAR(hierarchical_allreduce_seconds(1e9, 12, 6, c), intra + inter, 1e-12);
  // Within one node it is the plain ring.
  EXPECT_NEAR(hierarchical_allreduce_seconds(1e9, 4, 6, c), ring_allreduce_seconds(1e9, 4, 50e9, 2e-6), 1e-12);
}

StageCosts uniform(int stages, double f, double b, double send) {
  StageCosts c;
  c.forward.assign(stages, f);
  c.backward.assign(stages, b);
  c.send.assign(stages - 1, send);
  return c;
}

const ScheduleEvent& find_event(const std::vector<ScheduleEvent>& events, ScheduleEvent::Kind k, int device, int m) {
  for (const ScheduleEvent& e : events)
    if (e.kind == k && e.device == device && e.micro_batch == m) return e;
  throw std::runtime_error("event not found");
}

const ScheduleEvent& find(const ScheduleResult& r, ScheduleEvent::Kind k, int device, int m) {
  return find_event(r.events, k, device, m);
}

TEST(Schedule, TwoStageGPipeEventsAtHandComputedTimes) {
  // f = 1, b = 2, no send, M = 2: stage 0 F0 [0,1] F1 [1,2]; stage 1 F0 [1,2] F1 [2,3],
  // B1 [3,5] B0 [5,7]; stage 0 B1 [5,7] B0 [7,9].
  const ScheduleResult r = simulate_schedule(uniform(2, 1, 2, 0), 2, PipelineScheduleKind::kGPipe);
  using K = ScheduleEvent::Kind;
  EXPECT_DOUBLE_EQ(find(r, K::kForward, 0, 1).start, 1);
  EXPECT_DOUBLE_EQ(find(r, K::kForward, 1, 0).start, 1);
  EXPECT_DOUBLE_EQ(find(r, K::kForward, 1, 1).end, 3);
  EXPECT_DOUBLE_EQ(find(r, K::kBackward, 1, 1).start, 3);
  EXPECT_DOUBLE_EQ(find(r, K::kBackward, 1, 0).end, 7);
  EXPECT_DOUBLE_EQ(find(r, K::kBackward, 0, 1).start, 5);
  EXPECT_DOUBLE_EQ(find(r, K::kBackward, 0, 0).end, 9);
  EXPECT_DOUBLE_EQ(r.makespan, 9);
}

TEST(Schedule, GPipeBubbleIsKMinusOneOverMPlusKMinusOne) {
  for (int K : {2, 4}) {
    for (int M : {1, 2, 4, 8}) {
      const ScheduleResult r = simulate_schedule(uniform(K, 1, 2, 0), M, PipelineScheduleKind::kGPipe);
      const double ideal = 3.0 * M;  // one stage's own work
      EXPECT_NEAR((r.makespan - ideal) / r.makespan, (K - 1.0) / (M + K - 1.0), 1e-12) << "K " << K << " M " << M;
    }
  }
}

TEST(Schedule, OneFOneBTakesAsLongAsGPipeWithUniformStages) {
  for (int M : {1, 2, 4, 8}) {
    const double gpipe = simulate_schedule(uniform(4, 1, 2, 0), M, PipelineScheduleKind::kGPipe).makespan;
    EXPECT_DOUBLE_EQ(simulate_schedule(uniform(4, 1, 2, 0), M, PipelineScheduleKind::kOneFOneB).makespan, gpipe);
  }
}

TEST(Schedule, SendsDelayTheReceiverNotTheSender) {
  const ScheduleResult r = simulate_schedule(uniform(2, 1, 2, 0.5), 2, PipelineScheduleKind::kGPipe);
  using K = ScheduleEvent::Kind;
  EXPECT_DOUBLE_EQ(find(r, K::kForward, 0, 1).start, 1);    // the sender goes on
  EXPECT_DOUBLE_EQ(find(r, K::kForward, 1, 0).start, 1.5);  // the receiver waits for the send
  EXPECT_DOUBLE_EQ(find(r, K::kBackward, 0, 1).start, 3.5 + 2 + 0.5);
}

TEST(Schedule, AllreduceFollowsEachStagesLastBackward) {
  StageCosts c = uniform(2, 1, 2, 0);
  c.allreduce = {0.25, 0.25};
  const ScheduleResult r = simulate_schedule(c, 2, PipelineScheduleKind::kGPipe);
  EXPECT_DOUBLE_EQ(r.makespan, 9.25);
}

TEST(SeedUNet, ParameterCountsAreTheSeedsTable) {
  // Seal et al. (ICPP 2020), benchmark table: Small, Medium-1, Medium-2, Large.
  const struct {
    int levels, convs;
    int64_t params;
  } table[] = {{6, 2, 72301856}, {6, 5, 232687904}, {7, 2, 289357088}, {8, 2, 1157578016}};
  for (const auto& row : table) {
    UNetOptions o;
    o.name = "s0-unet";
    o.in_channels = 4;
    o.classes = 1;
    o.levels = row.levels;
    o.convs_per_level = row.convs;
    o.base_filters = 64;
    o.padding = Padding::kSame;
    EXPECT_EQ(seed_unet_layer_sequence(o, 256).parameter_count(), row.params) << "levels " << row.levels;
  }
}

TEST(Cluster, DefaultsAreValid) { EXPECT_NO_THROW(ClusterModel{}.validate()); }

TEST(Cluster, ShippedFilesLoad) {
  for (const char* name : {"summit.yaml", "dgx1.yaml", "dgx-a100.yaml", "this-machine.yaml", "p40-server.yaml"}) {
    const ClusterModel c = load_cluster(kClusters / name);
    EXPECT_GT(c.device.fp32_flops, 0) << name;
  }
  const ClusterModel summit = load_cluster(kClusters / "summit.yaml");
  EXPECT_EQ(summit.devices_per_node, 6);
  EXPECT_DOUBLE_EQ(summit.inter_node_bytes_per_second, 25e9);
  EXPECT_TRUE(load_cluster(kClusters / "this-machine.yaml").device.fp32_from_calibration);
}

TEST(Cluster, UnknownKeyIsNamedWithTheFile) {
  const auto path = std::filesystem::temp_directory_path() / "tessera_cluster_bad.yaml";
  std::ofstream(path) << "name: x\ndevice: {fp32_flopz: 1e12}\n";
  try {
    load_cluster(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device.fp32_flopz"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(Simulate, DataParallelPassIsStepsTimesStepAndFitsItsBreakdown) {
  ClusterModel c = load_cluster(kClusters / "summit.yaml");
  c.nodes = 2;
  const UNetOptions o = unet_preset("unet-tiny");
  const SimulationResult r = simulate(SimulationOptions(unet_layer_sequence(o, 132)).with_tiles(100).with_data_parallel(12), c);
  EXPECT_EQ(r.steps, 9);
  EXPECT_NEAR(r.pass_seconds, 9 * r.step_seconds, 1e-12);
  const TimeBreakdown& b = r.breakdown;
  EXPECT_NEAR(b.compute + b.bubble + b.halo + b.allreduce + b.io + b.optimizer, r.pass_seconds, 1e-9 * r.pass_seconds);
  EXPECT_GT(b.allreduce, 0);
  EXPECT_EQ(b.halo, 0);
}

TEST(Simulate, RefusesMoreDevicesThanTheNodesHave) {
  ClusterModel c = load_cluster(kClusters / "dgx1.yaml");
  const UNetOptions o = unet_preset("unet-tiny");
  EXPECT_THROW(simulate(SimulationOptions(unet_layer_sequence(o, 132)).with_data_parallel(9), c), Error);
}

TEST(Simulate, GanttChartHasOneBoxPerEvent) {
  ClusterModel c = load_cluster(kClusters / "dgx1.yaml");
  const UNetOptions o = unet_preset("unet-tiny");
  const SimulationResult r = simulate(
      SimulationOptions(unet_layer_sequence(o, 132)).with_pipeline_stages(2).with_micro_batches(2), c);
  const std::string svg = gantt_svg(r.events, "t");
  size_t boxes = 0;
  for (size_t p = 0; (p = svg.find("<rect", p)) != std::string::npos; ++p) ++boxes;
  EXPECT_EQ(boxes, r.events.size() + 7);  // + the legend's seven
  EXPECT_EQ(svg.rfind("</svg>"), svg.size() - 7);
}

// Measured layer times (`tessera plan --calibrate`) replace the device model: a third of each
// is the forward, the rest the backward.
TEST(Simulate, MeasuredLayerTimesReplaceTheDeviceModel) {
  const ClusterModel c = load_cluster(kClusters / "this-machine.yaml");
  const UNetOptions o = unet_preset("unet-tiny");
  const LayerSequence seq = unet_layer_sequence(o, 132);
  std::vector<double> measured;
  for (int i = 0; i < seq.size(); ++i) measured.push_back(1e-3 * (i % 5 + 1));
  const SimulationResult r = simulate(SimulationOptions(seq).with_layer_train_seconds(measured), c);
  double sum = 0;
  for (double t : measured) sum += t;
  EXPECT_NEAR(r.tile_seconds, sum, 1e-12);
  ASSERT_EQ(r.layer_seconds.size(), measured.size());
  for (size_t i = 0; i < measured.size(); ++i) EXPECT_NEAR(r.layer_seconds[i], measured[i], 1e-15);
  const ScheduleEvent& forward = find_event(r.events, ScheduleEvent::Kind::kForward, 0, 0);
  const ScheduleEvent& backward = find_event(r.events, ScheduleEvent::Kind::kBackward, 0, 0);
  EXPECT_NEAR(forward.end - forward.start, sum / 3, 1e-12);
  EXPECT_NEAR(backward.end - backward.start, 2 * sum / 3, 1e-12);
  measured.pop_back();
  try {
    simulate(SimulationOptions(seq).with_layer_train_seconds(measured), c);
    FAIL() << "a short layer-time list was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer times"), std::string::npos) << e.what();
  }
}

// Without a measured convolution table a micro-batch of b tiles costs b tiles' time: on one
// stage, M = 1 × b = 3 takes as long as M = 3 × b = 1; on two stages the first forward lasts
// b times as long. (With dgx1.yaml's measured table the batch is priced as a whole:
// DeviceModel, MeasuredTableGivesBatchesTheirOwnEfficiency in device_model_test.cpp.)
TEST(Simulate, MicroBatchOfBTilesCostsBTiles) {
  ClusterModel c = load_cluster(kClusters / "dgx1.yaml");
  c.device.convolutions = ConvTable{};
  const UNetOptions o = unet_preset("unet-tiny");
  const LayerSequence seq = unet_layer_sequence(o, 132);
  const SimulationResult b3 = simulate(SimulationOptions(seq).with_tiles(3).with_tiles_per_micro_batch(3), c);
  const SimulationResult m3 = simulate(SimulationOptions(seq).with_tiles(3).with_micro_batches(3), c);
  EXPECT_EQ(b3.steps, 1);
  EXPECT_NEAR(b3.step_seconds, m3.step_seconds, 1e-12 * m3.step_seconds);
  auto first_forward = [&](int b) {
    const SimulationResult r =
        simulate(SimulationOptions(seq).with_pipeline_stages(2).with_tiles_per_micro_batch(b), c);
    const ScheduleEvent& e = find_event(r.events, ScheduleEvent::Kind::kForward, 0, 0);
    return e.end - e.start;
  };
  EXPECT_NEAR(first_forward(4), 4 * first_forward(1), 1e-12);
}

// Adam's update: 28 bytes per parameter over the memory bandwidth, after the allreduce.
TEST(Simulate, AdamUpdateFollowsTheAllreduce) {
  const ClusterModel c = load_cluster(kClusters / "this-machine.yaml");
  const UNetOptions o = unet_preset("unet-tiny");
  const LayerSequence seq = unet_layer_sequence(o, 132);
  const SimulationResult plain = simulate(SimulationOptions(seq).with_data_parallel(2), c);
  const SimulationResult adam = simulate(SimulationOptions(seq).with_data_parallel(2).with_optimizer_step(true), c);
  double params = 0;
  for (const Layer& l : seq.layers) params += static_cast<double>(l.params);
  const double expected = 28.0 * params / c.device.memory_bytes_per_second;
  EXPECT_NEAR(adam.step_seconds - plain.step_seconds, expected, 1e-12);
  EXPECT_NEAR(adam.breakdown.optimizer, expected, 1e-12);
  EXPECT_EQ(plain.breakdown.optimizer, 0);
  const ScheduleEvent& update = find_event(adam.events, ScheduleEvent::Kind::kUpdate, 0, -1);
  EXPECT_NEAR(update.start, find_event(adam.events, ScheduleEvent::Kind::kAllreduce, 0, -1).end, 1e-15);
}

}  // namespace
}  // namespace tessera::parallel
