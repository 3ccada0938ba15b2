#include "tessera/engine/train_job.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "train_parts.hpp"
#include "tessera/core/cpu_tensor_cache.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/operator_profile.hpp"
#include "tessera/engine/preprocessing.hpp"
#include "tessera/engine/train_settings.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/run/process_memory.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/run/run_writer.hpp"

namespace tessera::engine {
namespace train {
namespace {

// `--resume auto`: RUN/checkpoints/last.pt; when that is damaged, the newest intact
// step-NNNNNN.pt (train.keep_last > 1), said on stderr. Refused when there is none.
std::string auto_resume_checkpoint(const std::string& run_dir, bool say) {
  const RunLayout run(run_dir);
  const std::string last = run.last_checkpoint();
  try {
    verify_checkpoint(last);
    return last;
  } catch (const Error& damaged) {
    const std::vector<std::string> kept = run.step_checkpoints();
    for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
      try {
        verify_checkpoint(*it);
      } catch (const Error&) {
        continue;
      }
      if (say) std::fprintf(stderr, "tessera: warning: %s; resuming from %s instead\n", damaged.what(), it->c_str());
      return *it;
    }
    throw Error(std::string(damaged.what()) + (kept.empty() ? "; no step checkpoint to fall back to (train.keep_last > 1 keeps some)"
                                                            : "; no intact step checkpoint to fall back to either"));
  }
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// --auto's choices, one a line (rank 0, stderr).
void print_auto_choices(const std::vector<AutoChoice>& choices) {
  for (const AutoChoice& ch : choices) std::fprintf(stderr, "train: auto: %s\n", auto_choice_line(ch).c_str());
}

// --pp cuts a registry model's declared layer sequence (plugin.hpp, LayerLayout): refuses one
// that declares none, or whose parameters the declaration does not cover, naming the model.
void check_stageable(const UNetImpl& net, const std::string& config) {
  try {
    (void)net.layer_sequence(unet_alignment(net.options()));
  } catch (const Error& e) {
    throw Error(config + ": --pp: " + e.what() + " (--dp needs no layer sequence)");
  }
}

}  // namespace

std::string resume_checkpoint(const std::string& resume, const std::string& run_dir, bool say) {
  const std::string path = resume == "auto" ? auto_resume_checkpoint(run_dir, say) : resume;
  if (say) std::fprintf(stderr, "train: resuming from %s\n", path.c_str());
  return path;
}

}  // namespace train

std::string config_relative(const std::string& config, const std::string& p) {
  namespace fs = std::filesystem;
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (fs::path(config).parent_path() / p).lexically_normal().string();
}

void absolute_data_paths(RunConfig& c, const std::string& config) {
  namespace fs = std::filesystem;
  const auto absolute = [&](std::string& p) {
    if (!p.empty()) p = fs::absolute(config_relative(config, p)).lexically_normal().string();
  };
  for (std::vector<PairConfig>* pairs : {&c.data.pairs, &c.data.source.pairs})
    for (PairConfig& p : *pairs) {
      absolute(p.image);
      absolute(p.labels);
    }
  for (TargetConfig& t : c.data.targets)
    for (std::string& image : t.images) absolute(image);
  absolute(c.data.dataset);
}

RunConfig load_run_config(const std::string& config) { return load_run_config(ConfigFile::load(config)); }

RunConfig load_run_config(const ConfigFile& file) {
  RunConfig c = read_run_config(file);
  c.train.run_dir = config_relative(file.name(), c.train.run_dir);
  return c;
}

TrainJob::TrainJob(RunConfig config, TrainRequest request) : config_(std::move(config)), request_(std::move(request)) {}

namespace train {
namespace {

// The run and its report; the validation cases to decide the post-processing on (--auto with
// a dataset's validation cases), else none.
std::vector<MsdCase> train_and_report(RunConfig& c, const TrainRequest& f) {
  const auto started = std::chrono::steady_clock::now();
  validate(c.data.normalization, f.config);  // before any image is read
  validate(c.data.resample, f.config);
  refuse_unhonoured_settings(c, f.config);
  if (c.model.is_dsn()) {
    run_dsn(f, c);
    return {};
  }
  const UNetOptions& model = c.model.options;
  Dataset data = c.data.dataset.empty() ? open_pairs(c, f.config) : open_dataset(c, f.config);
  CheckpointMeta meta = describe_model(c, data, f.config);
  TrainOptions& t = c.train;

  parallel::Communicator& world = parallel::world();
  parallel::ProcessGrid grid(world, grid_shape(c.parallel));
  check_parallel(c, grid, f.config);
  Hooks hooks = make_hooks(c, grid);
  const bool root_rank = grid.is_root();
  if (!f.resume.empty()) t.resume = resume_checkpoint(f.resume, t.run_dir, root_rank);
  const int threads = configure_threads(f.threads.value_or(0));
  std::vector<AutoChoice> choices = f.auto_plan.choices;
  if (f.auto_plan.time_budget_s > 0) {
    if (world.size() > 1) throw Error(f.config + ": --time-budget measures steps on one process; give train.steps under an MPI launcher");
    for (AutoChoice& ch : shape_to_budget(c, choices, f.auto_plan.median_shape, data, meta, f.auto_plan.time_budget_s,
                                          f.auto_plan.planning_s + seconds_since(started)))
      choices.push_back(std::move(ch));
    double reserve = 0;  // the validation cases' inference at the end
    if (decides_postprocessing(f, data)) {
      std::string why;
      reserve = validation_seconds(c, data, why);
      choices.push_back({"validation_inference", fmt::format("{:.2f} s", reserve), why, ""});
    }
    choices.push_back(budget_steps(t, c.model.options, data, meta, f.auto_plan.time_budget_s,
                                   f.auto_plan.planning_s + seconds_since(started), reserve));
  }
  torch::manual_seed(t.seed);
  UNet net(c.model.options);
  if (!model.is_builtin() && c.parallel.pp > 1) check_stageable(*net, f.config);
  if (root_rank) {
    write_resolved_config(c, grid, f.config, choices.empty() ? "" : auto_choices_comment(choices));
    print_auto_choices(choices);
    for (const std::string& note : data.notes) std::fprintf(stderr, "train: %s\n", note.c_str());
    print_plan(c, grid, hooks, threads, net);
  }
  const std::unique_ptr<parallel::DeviceMonitor> monitor = start_monitor(t, hooks);
  RunWriter run_writer(t.run_dir);  // core reports; metrics.jsonl and checkpoints/ are written here
  const int64_t predicted = predicted_rank_bytes(c, grid, resident_bytes());  // on what this rank holds now
  const TrainReport r = [&] {
    // The step's freed buffers reused or returned, not kept in the heap (large tiles).
    const CpuRunMemoryScope memory(train_mmap_threshold(level0_bytes(t, c.model.options)));
    const OperatorProfile profile(f.profile, root_rank);
    return tessera::train(net, data.pairs, t, meta, hooks.get(), data.validation, &run_writer);
  }();
  monitor->set_phase("done");
  monitor->sample_now();
  print_telemetry_summary(world, *monitor, predicted);
  if (root_rank) print_report(r);
  if (root_rank && hooks.data) print_communication(*hooks.data);
  if (root_rank && hooks.spatial && r.steps > 0) print_halo_exchange(*hooks.spatial, r.steps);
  return decides_postprocessing(f, data) ? data.validation_cases : std::vector<MsdCase>{};
}

}  // namespace
}  // namespace train

void TrainJob::run() {
  // The training's network, data and monitor are gone before the validation cases are inferred.
  const std::vector<MsdCase> validation = train::train_and_report(config_, request_);
  if (!validation.empty()) train::decide_on_validation(config_, request_, validation);
}

}  // namespace tessera::engine
