#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <torch/torch.h>

#include "train_parts.hpp"
#include "tessera/core/cpu_tensor_cache.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/dsn_training.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/engine/operator_profile.hpp"
#include "tessera/io/normalization.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/run/run_writer.hpp"

namespace tessera::engine::train {
namespace {

// "0 (source)", "1 2 3": domains as the plan line names them.
std::string describe_domains(const std::vector<int>& domains) {
  std::string s;
  for (int d : domains) s += (s.empty() ? "" : ", ") + (d == 0 ? std::string("source") : "target " + std::to_string(d));
  return s;
}

// What the domain-parallel path refuses beyond the settings table (train_settings.hpp):
// more stages than the DSN's chain has layers, MMD in stages, registry models.
void refuse_unsupported(const TrainRequest& request, const RunConfig& c) {
  const std::string& config = request.config;
  const int layers = c.model.options.levels + 1;  // one per encoder level, then the heads (dsn_training.cpp)
  if (c.parallel.pp > layers)
    throw Error(config + ": --pp " + std::to_string(c.parallel.pp) + ": a DSN of " +
                std::to_string(c.model.options.levels) + " levels has " + std::to_string(layers) +
                " pipeline layers (its encoder levels, then its heads); use --pp " + std::to_string(layers) + " or fewer");
  if (c.parallel.pp > 1 && c.model.dsn.similarity == Similarity::kMmd)
    throw Error(config + ": model.dsn.similarity mmd: --pp " + std::to_string(c.parallel.pp) +
                ": MMD compares every domain's whole batch at once, so no micro-batch's backward may start before "
                "every domain's forward, which a pipeline schedule does not wait for; use dann with --pp");
  if (!c.model.options.is_builtin())
    throw Error(config + ": model.kind dsn shares the built-in U-Net's encoder; model " + c.model.options.name +
                " cannot be one (use a unet preset)");
}

// The source as plain pairs (domain 0; its holdout is never trained on: with train.validate
// the task network is validated on it at every epoch end) and every target's images, unlabelled (domains 1…).
struct Domains {
  Dataset source;
  CheckpointMeta meta;
  std::vector<std::unique_ptr<ImageSource>> target_images;
  std::vector<std::vector<TrainingPair>> pairs;
};

Domains open_domains(const std::string& config, RunConfig& c) {
  RunConfig source = c;
  source.data.pairs = c.data.source.pairs;
  Domains d;
  d.source = open_pairs(source, config);
  d.meta = describe_model(source, d.source, config);
  c.model.options = source.model.options;
  d.pairs.push_back(d.source.pairs);
  for (const TargetConfig& target : c.data.targets) {
    d.pairs.emplace_back();
    for (const std::string& path : target.images) {
      d.target_images.push_back(io::open_image(config_relative(config, path)));
      const ImageSource& image = *d.target_images.back();
      TrainingPair pair{&image, nullptr, Box{Index(image.info().extent.size(), 0), image.info().extent}};
      if (!d.meta.norm.resolved())  // a per-image kind (mr): each target image its own, as the source's
        pair.norm = &d.source.image_norms.emplace(&image, io::resolve_normalization(d.meta.norm, image)).first->second;
      d.pairs.back().push_back(pair);
    }
  }
  return d;
}

void print_dsn_plan(const RunConfig& c, const DsnOptions& dsn_options, const parallel::ProcessGrid& grid, int threads) {
  const UNetOptions& model = c.model.options;
  const TrainOptions& t = c.train;
  const int64_t priv = dsn_private_parameter_count(model, dsn_options);
  const parallel::GridShape& g = grid.shape();
  std::fprintf(stderr,
               "train: DSN, 1 source + %d target(s), %d-D U-Net L=%d f=%d (%lld parameters) + private encoders of "
               "%lld + reconstruction decoder %lld + domain classifier %lld; %s similarity; tiles %lld, batch %d per "
               "domain and replica; %d ranks = %d domain groups x %d replicas x %d stages x %d spatial blocks, %d "
               "threads\n",
               dsn_options.domains - 1, model.dims, model.levels, model.base_filters,
               (long long)unet_parameter_count(model), (long long)priv,
               (long long)dsn_recon_parameter_count(model, dsn_options),
               (long long)dsn_classifier_parameter_count(model, dsn_options), to_string(dsn_options.similarity).c_str(),
               (long long)t.tile, t.batch, grid.world_size(), g.domain, g.data, g.pipeline, g.spatial, threads);
  const int per_group = grid.world_size() / g.domain;
  for (int group = 0; group < g.domain; ++group)
    std::fprintf(stderr, "train: domain group %d (ranks %d-%d): %s\n", group, group * per_group,
                 (group + 1) * per_group - 1,
                 describe_domains(parallel::domains_of_group(group, g.domain, dsn_options.domains)).c_str());
}

}  // namespace

// mpirun -np P tessera train --config dsn.yaml [--sp S]: P ranks in G domain groups of P / G
// ranks (parallel.dp replicas × S spatial blocks), group g training the domains
// [g·D/G, (g+1)·D/G) (parallel/modes/domain_hooks.hpp).
void run_dsn(const TrainRequest& request, RunConfig& c) {
  const std::string& config = request.config;
  refuse_unsupported(request, c);
  Domains data = open_domains(config, c);
  const UNetOptions& model = c.model.options;
  TrainOptions& t = c.train;
  DsnOptions dsn_options = c.model.dsn;
  dsn_options.domains = static_cast<int>(data.pairs.size());
  try {
    dsn_options.validate(model);
  } catch (const Error& e) {
    throw Error(config + ": " + e.what());
  }
  check_dsn_training(model, dsn_options, data.pairs, t);

  parallel::Communicator& world = parallel::world();
  const int spatial = std::max(1, c.parallel.sp), stages = std::max(1, c.parallel.pp);
  if (world.size() % (spatial * stages) != 0)
    throw Error(config + ": --pp " + std::to_string(stages) + " × --sp " + std::to_string(spatial) +
                " does not divide the " + std::to_string(world.size()) + " ranks");
  const int groups = parallel::domain_groups(world.size() / (spatial * stages), dsn_options.domains, c.parallel.dp);
  parallel::ProcessGrid grid(
      world, parallel::GridShape().with_spatial(spatial).with_pipeline(stages).with_domain(groups));
  check_parallel(c, grid, config);
  Hooks hooks = make_hooks(c, grid, dsn_options.domains);
  const bool root_rank = grid.is_root();
  if (!request.resume.empty()) {
    t.resume = resume_checkpoint(request.resume, t.run_dir, root_rank);
    check_dsn_resume(t.resume, groups);
  }
  const int threads = configure_threads(request.threads.value_or(0));
  Dsn dsn(model, dsn_options, hooks.domain->domains(dsn_options.domains), t.seed);
  hooks.domain->bind(*dsn);
  if (root_rank) {
    write_resolved_config(c, grid, config);
    for (const std::string& note : data.source.notes) std::fprintf(stderr, "train: %s\n", note.c_str());
    print_dsn_plan(c, dsn_options, grid, threads);
  }
  parallel::DeviceMonitor monitor(parallel::DeviceMonitorOptions::for_this_rank(t.run_dir));
  monitor.set_phase("train");
  hooks.set_step_callback([&monitor, tiles = int64_t(t.batch) * int64_t(dsn->parts->owned().size())](int64_t step, double) {
    monitor.set_step(step);
    monitor.set_tiles_done(step * tiles);
  });
  RunWriter run_writer(t.run_dir);
  const TrainReport r = [&] {
    const CpuRunMemoryScope memory(train_mmap_threshold(level0_bytes(t, model)));  // as train_job.cpp
    const OperatorProfile profile(request.profile, root_rank);
    return tessera::train(dsn, data.pairs, t, data.meta, hooks.get(), data.source.validation, &run_writer);
  }();
  monitor.set_phase("done");
  monitor.sample_now();
  print_telemetry_summary(world, monitor);
  if (root_rank) print_report(r);
}

}  // namespace tessera::engine::train
