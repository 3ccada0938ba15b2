// The DSN in pipeline stages reproduces the single-process DSN: its chain of encoder levels
// (shared and private side by side, their codes and skips travelling together) and heads
// (both decoders, the classifier, the loss terms) cut into 2 stages, the micro-batches the
// domains a group trains (one domain's batch each), under GPipe and 1F1B with activation
// checkpointing never, always and except_last. After 3 steps (SGD and Adam) every shared and
// private parameter, the loss of every step and the trained network's forward output (logits
// and reconstruction of a fixed tile) are the one process's with the global batch, within
// 1e-5 relative (Adam norm-wise, as domain_test.cpp explains), for pp 2 alone (2 ranks),
// dp 2 × pp 2 and 2 domain groups × pp 2 (4 ranks), and all four axes at once: 1 + 1 domains
// in 2 groups × dp 2 × pp 2 × sp 2 (16 ranks, oversubscribed: a tiny network, 32² tiles).
// Each ctest entry runs the tests of its rank count (tests/CMakeLists.txt); a test asserts it.
// The planted bugs: the shared gradients not summed over the domain axis (the stages' sums
// over pipeline, blocks and replicas kept), and one stage's private encoder gradients dropped
// before the sum over the pipeline — both leave the bound by far.
#include "dsn_fixture.hpp"

#include <cstdio>
#include <string>

#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/model_sync.hpp"
#include "tessera/parallel/comm/process_grid.hpp"

namespace tessera::parallel {
namespace {

using namespace dsn_test;

struct Layout {
  int groups = 1, stages = 2, spatial = 1;
  PipelineScheduleKind schedule = PipelineScheduleKind::kOneFOneB;
  ActivationCheckpoint checkpoint = ActivationCheckpoint::kNever;
};

// Hooks that keep the grid, for the planted bugs below.
class GridHooks : public RecordingDomainHooks {
 public:
  GridHooks(const ProcessGrid& grid, int domains, SpatialMesh mesh, DomainHookOptions options)
      : RecordingDomainHooks(grid, domains, std::move(mesh), options), grid_(grid) {}

 protected:
  const ProcessGrid& grid_;
};

// Planted: the shared gradients summed over the pipeline, blocks and replicas only.
class SharedNotOverDomainsHooks : public GridHooks {
 public:
  using GridHooks::GridHooks;
  void on_gradients(UNet&) override {
    const std::vector<Communicator*> within = {&grid_.pipeline(), &grid_.spatial(), &grid_.data()};
    sum_gradients(dsn().shared_parameters(), within);
    sum_gradients(private_parameters(), within);
  }
};

// Planted: stage 1's private encoder gradients dropped before the sum over the pipeline.
class DroppedStagePrivatesHooks : public GridHooks {
 public:
  using GridHooks::GridHooks;
  void on_gradients(UNet& net) override {
    if (grid_.pipeline_stage() == 1) {
      torch::NoGradGuard g;
      for (auto& p : private_parameters())
        if (p.grad().defined()) p.mutable_grad().zero_();
    }
    DomainTrainHooks::on_gradients(net);
  }
};

struct Comparison {
  double parameters = 0, losses = 0, output = 0;
};

std::string describe(const Layout& l) {
  return std::string(l.schedule == PipelineScheduleKind::kGPipe ? "GPipe" : "1F1B") + ", checkpoint " +
         (l.checkpoint == ActivationCheckpoint::kNever    ? "never"
          : l.checkpoint == ActivationCheckpoint::kAlways ? "always"
                                                          : "except_last");
}

// Every rank: the DSN trained through the stages of `l` vs its own one-process reference.
template <class Hooks = RecordingDomainHooks>
Comparison compare_staged(const DsnSetup& s, const Layout& l) {
  Communicator& w = world();
  const ProcessGrid grid(w, GridShape().with_domain(l.groups).with_pipeline(l.stages).with_spatial(l.spatial));
  Hooks hooks(grid, s.domains, SpatialMesh::along_first_axis(l.spatial, 2),
              DomainHookOptions().with_writes_outputs(w.rank() == 0).with_schedule(l.schedule).with_checkpoint(l.checkpoint));
  const int b = 2;
  Result parallel = train_once(s, &hooks, b, nullptr, temp_dir("pp" + std::to_string(w.rank())));
  std::vector<double> reference_losses;
  Result single = train_once(s, nullptr, b * hooks.replicas(), &reference_losses, temp_dir("ps" + std::to_string(w.rank())));
  Comparison c;
  const auto difference = s.optimizer == OptimizerKind::kAdam ? norm_relative_difference : max_relative_difference;
  c.parameters = difference(parallel.shared, single.shared);
  for (const auto& [d, p] : parallel.privates) c.parameters = std::max(c.parameters, difference(p, single.privates.at(d)));
  c.losses = max_relative_loss_difference(hooks.losses, reference_losses);
  c.output = output_difference(parallel, single, hooks);
  torch::Tensor worst = torch::tensor({c.parameters, c.losses, c.output}, torch::kFloat64);
  w.allreduce(worst, ReduceOp::kMax);
  if (w.rank() == 0)
    std::printf("[ rank 0  ] 1 + %d domains, %d ranks = %d groups x %d replicas x %d stages x %d blocks, %s, %s "
                "(batch %d vs 1 x %d), %d steps: worst over ranks: parameters (%s) %.3g, loss %.3g, forward output %.3g\n",
                s.domains - 1, w.size(), l.groups, hooks.replicas(), l.stages, l.spatial, describe(l).c_str(),
                s.optimizer == OptimizerKind::kAdam ? "Adam" : "SGD", b, b * hooks.replicas(), s.steps,
                s.optimizer == OptimizerKind::kAdam ? "norm-wise" : "element-wise", worst[0].item<double>(),
                worst[1].item<double>(), worst[2].item<double>());
  return c;
}

void expect_exact(const Comparison& c) {
  EXPECT_LE(c.parameters, 1e-5);
  EXPECT_LE(c.losses, 1e-5);
  EXPECT_LE(c.output, 1e-5);
}

DsnSetup setup(OptimizerKind optimizer) {
  DsnSetup s{2, optimizer, Similarity::kDann, Norm::kNone};
  s.steps = 3;
  return s;
}

// --- 2 ranks: pp 2 alone, one group training both domains (2 micro-batches) ---

TEST(DsnPipeline, TwoStagesGPipeEqualsOneProcess) {
  ASSERT_EQ(world().size(), 2) << "pp 2: mpirun -np 2";
  expect_exact(compare_staged(setup(OptimizerKind::kSgd), {1, 2, 1, PipelineScheduleKind::kGPipe}));
  expect_exact(compare_staged(setup(OptimizerKind::kAdam), {1, 2, 1, PipelineScheduleKind::kGPipe}));
}

TEST(DsnPipeline, TwoStagesOneFOneBEqualsOneProcess) {
  ASSERT_EQ(world().size(), 2) << "pp 2: mpirun -np 2";
  expect_exact(compare_staged(setup(OptimizerKind::kSgd), {1, 2, 1, PipelineScheduleKind::kOneFOneB}));
  expect_exact(compare_staged(setup(OptimizerKind::kAdam), {1, 2, 1, PipelineScheduleKind::kOneFOneB}));
}

TEST(DsnPipeline, TwoStagesCheckpointedEqualsOneProcess) {
  ASSERT_EQ(world().size(), 2) << "pp 2: mpirun -np 2";
  expect_exact(compare_staged(setup(OptimizerKind::kSgd),
                              {1, 2, 1, PipelineScheduleKind::kOneFOneB, ActivationCheckpoint::kAlways}));
  expect_exact(compare_staged(setup(OptimizerKind::kAdam),
                              {1, 2, 1, PipelineScheduleKind::kGPipe, ActivationCheckpoint::kExceptLast}));
}

TEST(DsnPipeline, DroppedStagePrivateGradientsAreCaught) {
  ASSERT_EQ(world().size(), 2) << "pp 2: mpirun -np 2";
  const Comparison c = compare_staged<DroppedStagePrivatesHooks>(setup(OptimizerKind::kSgd), {1, 2, 1});
  EXPECT_GT(c.parameters, 1e-3);
}

// MMD needs every domain's whole batch before any backward: refused in stages, naming the key.
TEST(DsnPipeline, MmdIsRefusedInStages) {
  ASSERT_EQ(world().size(), 2) << "pp 2: mpirun -np 2";
  DsnSetup s = setup(OptimizerKind::kSgd);
  s.similarity = Similarity::kMmd;
  try {
    compare_staged(s, {1, 2, 1});
    ADD_FAILURE() << "MMD ran in pipeline stages";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.dsn.similarity: mmd"), std::string::npos) << e.what();
  }
}

// --- 4 ranks: dp 2 × pp 2 (one group), 2 domain groups × pp 2 ---

TEST(DsnPipeline, DataTimesTwoStagesEqualsOneProcess) {
  ASSERT_EQ(world().size(), 4) << "dp 2 x pp 2: mpirun -np 4";
  expect_exact(compare_staged(setup(OptimizerKind::kSgd), {1, 2, 1, PipelineScheduleKind::kOneFOneB}));
  expect_exact(compare_staged(setup(OptimizerKind::kAdam),
                              {1, 2, 1, PipelineScheduleKind::kGPipe, ActivationCheckpoint::kAlways}));
}

TEST(DsnPipeline, DomainGroupsTimesTwoStagesEqualsOneProcess) {
  ASSERT_EQ(world().size(), 4) << "2 domain groups x pp 2: mpirun -np 4";
  expect_exact(compare_staged(setup(OptimizerKind::kSgd), {2, 2, 1, PipelineScheduleKind::kGPipe}));
  expect_exact(compare_staged(setup(OptimizerKind::kAdam), {2, 2, 1, PipelineScheduleKind::kOneFOneB}));
}

TEST(DsnPipeline, SharedGradientsNotSummedOverDomainsAreCaught) {
  ASSERT_EQ(world().size(), 4) << "2 domain groups x pp 2: mpirun -np 4";
  const Comparison c = compare_staged<SharedNotOverDomainsHooks>(setup(OptimizerKind::kSgd), {2, 2, 1});
  EXPECT_GT(c.parameters, 1e-3);
}

// --- 16 ranks: all four axes, 1 + 1 domains in 2 groups × dp 2 × pp 2 × sp 2 ---

TEST(DsnPipeline, AllFourAxesSgdEqualsOneProcess) {
  ASSERT_EQ(world().size(), 16) << "2 domain groups x dp 2 x pp 2 x sp 2: mpirun -np 16";
  expect_exact(compare_staged(setup(OptimizerKind::kSgd),
                              {2, 2, 2, PipelineScheduleKind::kOneFOneB, ActivationCheckpoint::kAlways}));
}

TEST(DsnPipeline, AllFourAxesAdamEqualsOneProcess) {
  ASSERT_EQ(world().size(), 16) << "2 domain groups x dp 2 x pp 2 x sp 2: mpirun -np 16";
  expect_exact(compare_staged(setup(OptimizerKind::kAdam), {2, 2, 2, PipelineScheduleKind::kGPipe}));
}

}  // namespace
}  // namespace tessera::parallel
