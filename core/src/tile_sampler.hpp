#pragma once
// Internal to the trainer. TileSampler draws training tiles (planning is cheap and runs on
// the training thread, so the random stream is the same whatever the reading speed);
// BatchLoader reads planned batches on one background thread through a bounded queue, in
// order (image sources are read by one thread at a time).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <torch/types.h>

#include "augmentation.hpp"
#include "tessera/core/trainer.hpp"

namespace tessera::detail {

struct Sample {
  torch::Tensor input;   // (B, C, spatial...)
  torch::Tensor target;  // (B, spatial...) int64
};

struct TilePlan {
  size_t pair = 0;
  Box out;                  // output box of the tile (labels)
  std::vector<bool> flips;  // per spatial axis
  int rotations = 0;        // quarter turns in the last two axes
  float scale = 1, shift = 0;
  uint64_t noise_seed = 0;  // 0 = no noise
  AugmentDraw augment;      // rotation, zoom, elastic, blur, contrast, gamma (augmentation.hpp)
};

struct BatchPlan {
  std::vector<TilePlan> tiles;  // this replica's slice of the global batch
};

class TileSampler {
 public:
  TileSampler(const std::vector<TrainingPair>& data, const UNetOptions& model, const TrainOptions& o,
              Normalization norm, int replica, int replicas);

  /// Draws the next global batch of output side `tile` + r and keeps this replica's slice.
  BatchPlan plan(int64_t tile);
  /// Reads a planned batch. Not thread-safe against itself: one reader at a time.
  Sample load(const BatchPlan& plan) const;

  /// The random stream's state (text), to store in a checkpoint and restore on resume.
  std::string rng_state() const;
  void set_rng_state(const std::string& state);

 private:
  struct Foreground {
    size_t pair;
    Index at;
  };
  void index_foreground();

  const std::vector<TrainingPair>& data_;
  UNetOptions model_;
  TrainOptions options_;
  Normalization norm_;
  int replica_, replicas_;
  std::mt19937_64 rng_;
  int64_t halo_;
  std::vector<double> weights_;
  std::vector<std::vector<Foreground>> foreground_;
};

class BatchLoader {
 public:
  explicit BatchLoader(const TileSampler& sampler);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  void submit(BatchPlan plan);
  /// The next batch in submission order; rethrows a reading error (e.g. a corrupt file).
  Sample take();
  size_t pending() const;

 private:
  void work();

  const TileSampler& sampler_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<BatchPlan> plans_;
  std::deque<Sample> ready_;
  std::exception_ptr error_;
  size_t in_flight_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera::detail
