// tessera bench dsn's worker: one DSN training of 1 source + N target domains, domain
// parallel (one domain per rank, parallel/modes/domain_hooks.hpp) or in one process, on
// synthetic domains whose pixels are computed when read (the data costs no memory). See
// bench_dsn.cpp for what it reports.
#include "bench_dsn_worker.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>

#include <fmt/format.h>
#include <torch/torch.h>

#include "bench_measure.hpp"
#include "tessera/core/dsn_training.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/parallel/modes/domain_hooks.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera::bench {
namespace {

constexpr int kBands = 4, kClasses = 4;

}  // namespace

UNetOptions dsn_bench_model(const std::string& preset) {
  UNetOptions o = unet_preset(preset)
                      .with_in_channels(kBands)
                      .with_classes(kClasses)
                      .with_padding(Padding::kSame)
                      .with_norm(Norm::kGroup);
  o.validate();
  return o;
}

namespace {

namespace fs = std::filesystem;

// A 2-D image whose value at (band, y, x) is a formula: read() computes the window asked
// for, so an image of any extent holds no pixels. Thread safe (read is const and pure).
class ProceduralImage final : public ImageSource {
 public:
  using Formula = std::function<float(int band, int64_t y, int64_t x)>;
  ProceduralImage(std::string name, int64_t side, int bands, Formula value) : value_(std::move(value)) {
    info_.path = std::move(name);
    info_.kind = "raster";
    info_.format = "procedural";
    info_.data_type = "Float32";
    info_.extent = {side, side};
    info_.channels = bands;
    info_.nodata.assign(size_t(bands), std::nullopt);
  }
  const ImageInfo& info() const override { return info_; }
  Block<float> read(const Box& box) const override {
    if (!Box{Index(2, 0), info_.extent}.contains(box)) throw Error(info_.path + ": window outside the image");
    Block<float> out({int64_t(info_.channels), box.size[0], box.size[1]});
    float* v = out.data.data();
    for (int c = 0; c < info_.channels; ++c)
      for (int64_t y = box.origin[0]; y < box.origin[0] + box.size[0]; ++y)
        for (int64_t x = box.origin[1]; x < box.origin[1] + box.size[1]; ++x) *v++ = value_(c, y, x);
    return out;
  }

 private:
  ImageInfo info_;
  Formula value_;
};

// 1 source with labels and D − 1 targets: the same kind of scene seen through another
// "sensor" each (gain 1 + 0.25 d, offset 0.1 d, odd domains with bands 0 and 1 swapped).
struct SyntheticDomains {
  SyntheticDomains(int domains, int64_t extent)
      : labels("synthetic labels", extent, 1, [](int, int64_t y, int64_t x) { return float((y / 16 + x / 24) % kClasses); }) {
    for (int d = 0; d < domains; ++d)
      images.push_back(std::make_unique<ProceduralImage>(
          "synthetic domain " + std::to_string(d), extent, kBands, [d](int c, int64_t y, int64_t x) {
            const int band = d % 2 && c < 2 ? 1 - c : c;
            const float v = std::sin(0.11f * float(y + 5 * d) + float(band)) + std::cos(0.07f * float(x) * float(band + 1));
            return (1.0f + 0.25f * float(d)) * v + 0.1f * float(d);
          }));
    for (int d = 0; d < domains; ++d)
      pairs.push_back({{images[size_t(d)].get(), d == 0 ? &labels : nullptr, Box{{0, 0}, {extent, extent}}}});
  }
  ProceduralImage labels;
  std::vector<std::unique_ptr<ProceduralImage>> images;
  std::vector<std::vector<TrainingPair>> pairs;
};

TrainOptions bench_training(const BenchDsnOptions& f, const std::string& run_dir) {
  TrainOptions t;
  t.tile = f.side;
  t.batch = f.batch;
  t.steps = f.steps;
  t.seed = 1;
  t.progress = false;
  t.channels_last = f.channels_last;
  t.checkpoint_every = std::numeric_limits<int32_t>::max();  // only the one at the last step
  t.run_dir = run_dir;
  return t;
}

}  // namespace

nlohmann::json run_dsn_worker(const BenchDsnOptions& f) {
  parallel::Communicator& world = parallel::world();
  const int domains = f.worker_domains;
  if (world.size() != 1 && world.size() != domains)
    throw Error("bench dsn worker: " + std::to_string(world.size()) + " ranks for " + std::to_string(domains) +
                " domains (one domain per rank, or one process)");
  configure_threads(f.threads);
  const UNetOptions model = dsn_bench_model(f.model);
  DsnOptions dsn;
  dsn.domains = domains;
  dsn.similarity = parse_similarity(f.similarity);
  dsn.validate(model);
  SyntheticDomains data(domains, std::max<int64_t>(4 * f.side, 256));
  const parallel::ProcessGrid grid(world, parallel::GridShape().with_domain(parallel::domain_groups(world.size(), domains, 0)));
  std::unique_ptr<parallel::DomainTrainHooks> hooks;
  if (world.size() > 1)
    hooks = std::make_unique<parallel::DomainTrainHooks>(grid, domains, SpatialMesh::along_first_axis(1, model.dims),
                                                         parallel::DomainHookOptions().with_writes_outputs(grid.is_root()));
  std::vector<int> owned(size_t(domains), 0);
  std::iota(owned.begin(), owned.end(), 0);
  if (hooks) owned = hooks->domains(domains);
  const fs::path run_dir =
      fs::temp_directory_path() / fmt::format("tessera-bench-dsn-{}-{}", ::getpid(), world.rank());
  fs::create_directories(run_dir);
  CheckpointMeta meta;
  meta.model = model;
  meta.norm = {std::vector<float>(kBands, 0.f), std::vector<float>(kBands, 1.f)};
  for (int c = 0; c < kClasses; ++c) meta.class_names.push_back("class " + std::to_string(c));

  const PeakMemoryMeter meter;  // before the network: its parameters count in the peak
  Dsn net(model, dsn, owned, 1);
  int64_t parameters = 0;
  for (const auto& p : net->parameters()) parameters += p.numel();
  if (hooks) hooks->bind(*net);
  const TrainReport r = tessera::train(net, data.pairs, bench_training(f, run_dir.string()), meta, hooks.get());
  const int64_t peak = meter.peak_increase();
  fs::remove_all(run_dir);
  torch::Tensor seconds = torch::tensor({r.seconds / double(f.steps)}, torch::kDouble);
  world.allreduce(seconds, parallel::ReduceOp::kMax);
  return {{"domains", domains},
          {"ranks", world.size()},
          {"peak_bytes", per_rank(world, peak)},
          {"parameters", per_rank(world, parameters)},
          {"step_seconds", seconds.item<double>()}};
}

}  // namespace tessera::bench
