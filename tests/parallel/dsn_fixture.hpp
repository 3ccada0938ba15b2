#pragma once
// The DSN fixture of the domain-parallel tests (domain_test.cpp, dsn_pipeline_test.cpp): a
// tiny `same` U-Net DSN on generated domains (the source labelled, targets seen through
// another "sensor"), trained through the one trainer with given hooks or as one process, and
// the comparisons of what it trained.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "../core/memory_image.hpp"
#include "loss_difference.hpp"
#include "tessera/core/dsn_training.hpp"
#include "tessera/core/decomposition.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/parallel/modes/domain_hooks.hpp"

namespace tessera::parallel::dsn_test {

using tessera::testing::MemoryImage;
using tessera::test::max_relative_loss_difference;
namespace fs = std::filesystem;

inline constexpr int64_t kSide = 96;

// Domain d: the same kind of pattern seen through another "sensor" (gain, offset, a band
// swap for odd d); the source alone has labels.
struct Domains {
  explicit Domains(int count, float scale = 1) {
    for (int d = 0; d < count; ++d)
      images.push_back(std::make_unique<MemoryImage>(Index{kSide, kSide}, 2, [d, scale](int c, const Index& at) {
        const int band = d % 2 ? 1 - c : c;
        const float v = std::sin(0.11f * float(at[0] + 5 * d) + band) + std::cos(0.07f * float(at[1]) * (band + 1));
        return ((1.0f + 0.3f * float(d)) * v + 0.2f * float(d)) * scale;
      }));
    for (int d = 0; d < count; ++d)
      data.push_back({{images[size_t(d)].get(), d == 0 ? &labels : nullptr, Box{{0, 0}, {kSide, kSide}}}});
  }
  MemoryImage labels{Index{kSide, kSide}, 1, [](int, const Index& at) {
                       if (at[1] > 80) return -1.0f;  // unlabelled band: ignored
                       return float((at[0] / 16 + at[1] / 24) % 3);
                     }};
  std::vector<std::unique_ptr<MemoryImage>> images;
  std::vector<std::vector<TrainingPair>> data;
};

inline UNetOptions tiny(Norm norm) {
  return unet_preset("unet-tiny")
      .with_in_channels(2)
      .with_classes(3)
      .with_base_filters(4)
      .with_levels(3)
      .with_padding(Padding::kSame)
      .with_norm(norm);
}

struct DsnSetup {
  int domains = 2;
  OptimizerKind optimizer = OptimizerKind::kSgd;
  Similarity similarity = Similarity::kDann;
  Norm norm = Norm::kNone;
  uint64_t seed = 7;         // the tile streams'
  bool float64 = false;      // the networks in float64
  float input_scale = 1;     // every image's values times this
  int steps = 4;
};

struct Result {
  torch::Tensor shared;                   // every shared parameter, flat
  std::map<int, torch::Tensor> privates;  // by domain: the private encoder, flat
  std::vector<double> losses;
  Dsn net{nullptr};                       // the trained network itself, as the trainer left it
};

inline torch::Tensor flat(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> v;
  for (const auto& p : ps) v.push_back(p.detach().reshape({-1}));
  return torch::cat(v);
}

class LossRecorder : public TrainHooks {
 public:
  void on_step(int64_t, double loss) override { losses.push_back(loss); }
  std::vector<double> losses;
};

inline std::string temp_dir(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("tessera-dsn-" + std::to_string(::getpid()) + "-" + name);
  fs::create_directories(d);
  return d.string();
}

// Trains the DSN of `s` for s.steps steps: through `hooks` (domain parallel) with batch `batch`,
// or as one process (hooks null); `recorded` receives the per-step losses.
inline Result train_once(const DsnSetup& s, DomainTrainHooks* hooks, int batch, std::vector<double>* recorded, const std::string& run_dir,
                  TrainObserver* observer = nullptr) {
  Domains data(s.domains, s.input_scale);
  DsnOptions dsn;
  dsn.domains = s.domains;
  dsn.private_filters = 4;
  dsn.recon_filters = 4;
  dsn.classifier_hidden = 8;
  dsn.alpha = 0.5;
  dsn.beta = 0.5;
  dsn.gamma = 0.5;
  dsn.similarity = s.similarity;
  dsn.mmd_sigmas = {0.5, 2};
  TrainOptions o;
  o.tile = 32;
  o.batch = batch;
  o.steps = s.steps;
  o.optimizer.kind = s.optimizer;
  o.optimizer.learning_rate = s.optimizer == OptimizerKind::kSgd ? 5e-2 : 1e-3;
  o.seed = s.seed;
  o.progress = false;
  // LibTorch 1.13's channels-last CPU group norm takes E[x^2] - E[x]^2 in float32, so its
  // statistics shift with how a batch is split (seen: 3.5e-5 relative after 4 steps at
  // 2 x 2 ranks); contiguous group norm is exact to rounding. As data_parallel_test.cpp
  // does for synchronised batch norm: a property of the kernel, not of the parallelism.
  o.channels_last = s.norm != Norm::kGroup;
  o.checkpoint_every = 1000;
  o.run_dir = run_dir;
  const std::vector<int> owned = hooks ? hooks->domains(s.domains) : std::vector<int>{};
  std::vector<int> all(size_t(s.domains));
  std::iota(all.begin(), all.end(), 0);
  Dsn net(tiny(s.norm), dsn, hooks ? owned : all, 3);
  if (hooks && world().rank() != 0) {
    // Other initial shared weights away from rank 0: the start-of-training broadcast fixes them.
    torch::NoGradGuard g;
    for (auto& p : net->shared_parameters()) p.add_(0.5);
  }
  if (s.float64) net->to(torch::kDouble);
  if (hooks) hooks->bind(*net);
  CheckpointMeta meta;
  meta.model = net->unet->options();
  meta.norm = {{0.f, 0.f}, {1.f, 1.f}};
  meta.class_names = {"a", "b", "c"};
  LossRecorder one;
  if (hooks)
    train(net, data.data, o, meta, hooks, {}, observer);
  else
    train(net, data.data, o, meta, &one, {}, observer);
  if (!hooks && recorded) *recorded = one.losses;
  Result r;
  r.shared = flat(net->shared_parameters());
  for (int d : net->parts->owned()) r.privates[d] = flat(net->parts->private_parameters(d));
  r.net = net;
  return r;
}

inline double max_relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

// ‖a − b‖ / ‖b‖. Adam's first steps are ±lr · sign(g): an element whose gradient is at the
// rounding level of the summation order takes a different step (seen: one element of 9723
// off by 2.4e-5 after 4 steps at lr 1e-3, 1.5e-5 of the largest parameter), so Adam runs are
// held to the norm-wise bound; SGD, whose step is proportional to the gradient, to the
// element-wise one.
inline double norm_relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

// Domain-parallel hooks that also keep the per-step losses.
class RecordingDomainHooks : public DomainTrainHooks {
 public:
  using DomainTrainHooks::DomainTrainHooks;
  void on_step(int64_t, double loss) override { losses.push_back(loss); }
  std::vector<double> losses;
};

// The logits and reconstruction of a fixed tile by the network `parallel` trained, on this
// rank's block under the hooks' decomposition (the whole tile without one), against the same
// block of `single`'s forward: max relative difference.
inline double output_difference(Result& parallel, Result& single, const DomainTrainHooks& hooks) {
  torch::NoGradGuard no_grad;
  const auto type = parallel.net->unet->parameters().front().scalar_type();
  const torch::Tensor x = torch::sin(torch::arange(2 * 32 * 32, torch::kFloat).reshape({1, 2, 32, 32}) * 0.37f).to(type);
  const int64_t alignment = unet_alignment(parallel.net->unet->options());
  const int domain = parallel.net->parts->owned().front();  // one of this rank's
  const DsnOutputs want = single.net->forward(x, domain, true);
  DsnOutputs got;
  {
    std::optional<DecompositionScope> scope;
    if (hooks.tile_decomposition()) scope.emplace(*hooks.tile_decomposition());
    got = parallel.net->forward(hooks.block(x, 2, alignment), domain, true);
  }
  double worst = 0;
  for (const auto& [g, w] : {std::pair{got.logits, want.logits}, std::pair{got.reconstruction, want.reconstruction}})
    worst = std::max(worst, ((g - hooks.block(w, 2, alignment)).abs().max() / w.abs().max()).item<double>());
  return worst;
}

// The trained network's logits and reconstruction of a fixed tile: this rank's block as the
// decomposition computes it against the same block of the whole tile's forward with the same
// weights, max relative difference.
inline double forward_difference(Result& parallel, const DomainTrainHooks& hooks) {
  EXPECT_NE(hooks.tile_decomposition(), nullptr);
  return output_difference(parallel, parallel, hooks);
}

}  // namespace tessera::parallel::dsn_test
