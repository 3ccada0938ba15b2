// GoogleTest under mpirun: every rank runs every test; only rank 0 prints. A failing rank
// makes mpirun exit non-zero. Tests must make the same collective calls on every rank.
// A --gtest_filter that selects no test fails the job: a mistyped suite name in a ctest entry
// would otherwise pass without testing anything.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <cstdio>

#include "tessera/parallel/comm/runtime.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto& world = tessera::parallel::world(/*force_mpi=*/true);
  at::set_num_threads(1);  // ranks share this machine's cores
  if (world.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  // Every rank sees the same filter, so every rank takes this branch or none does.
  if (!GTEST_FLAG_GET(list_tests) && ::testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    if (world.rank() == 0)
      std::fprintf(stderr, "tessera_parallel_tests: no test matches --gtest_filter=%s; nothing was tested\n",
                   GTEST_FLAG_GET(filter).c_str());
    return 1;
  }
  // A rank whose test failed reports it; the job fails if any rank failed.
  torch::Tensor any = torch::tensor({failed ? 1 : 0}, torch::kInt);
  world.allreduce(any, tessera::parallel::ReduceOp::kMax);
  return any.item<int>() ? 1 : 0;
}
