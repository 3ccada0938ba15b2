#pragma once
// Test hooks that make one rank of a job fail on purpose, so the tests can check what the
// other ranks do (tests/parallel/mpi_cli.sh). Off unless the environment asks for them:
//
//   TESSERA_TEST_HANG="rank=1,step=3"   world rank 1 stops answering (sleeps until killed)
//                                       when it reaches training step 3
//   TESSERA_TEST_THROW="rank=1,step=2"  world rank 1 throws tessera::Error in training step 2
//   TESSERA_TEST_THROW="rank=1,tile=2"  ... when it has computed its 2nd tile of a
//                                       sample-parallel inference
//   TESSERA_TEST_NAN="step=17"          training step 17 sees NaN inputs, so its loss is NaN
//                                       as in a diverging run (every rank alike)
//
// `rank` is the world rank (default 0); a process counts as rank 0 until the parallel
// runtime calls set_fault_rank. Steps and tiles count from 1. A malformed value is an
// error naming the variable, so a typo never silently turns a test into a pass.
// Torch-free (core_base). Thread safe: the environment is read once.
#include <cstdint>

namespace tessera {

enum class FaultPoint {
  kStep,  ///< a training step, numbered as in metrics.jsonl
  kTile,  ///< the n-th tile this rank computed in sample-parallel inference
};

/// This process's world rank, as the fault variables name it.
void set_fault_rank(int world_rank);

/// Called at `point` number `index`: sleeps forever (TESSERA_TEST_HANG) or throws
/// tessera::Error "rank N: injected failure …" (TESSERA_TEST_THROW) when the environment
/// names this rank and point; otherwise returns at once.
void fault_point(FaultPoint point, int64_t index);

/// Whether TESSERA_TEST_NAN names training step `step` (the trainer then fills that step's
/// batch with NaN). Any rank asks and gets the same answer.
bool fault_nan_at_step(int64_t step);

}  // namespace tessera
