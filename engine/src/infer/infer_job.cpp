#include "tessera/engine/infer_job.hpp"

#include <cstdio>
#include <numeric>

#include "infer_parts.hpp"
#include "pacs.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/cpu_tensor_cache.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/engine/operator_profile.hpp"
#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::engine {
namespace {

using namespace infer;

// Whole scenes handed to the ranks, each run by one rank alone; the summary line on rank 0.
void run_whole_scenes(const InferOptions& o, const Model& model, const std::vector<SceneJob>& jobs,
                      parallel::Communicator& world, int threads) {
  const auto alone = parallel::make_self_communicator();  // a whole scene runs on one rank
  const SceneBatchReport r = engine::run_whole_scenes(jobs, model.maker, world, [&](const SceneJob& job) {
    infer_image(o, model, job, *alone, threads, true);
    if (world.size() > 1) std::printf("%s: rank %d\n", job.output.c_str(), world.rank());
  });
  if (world.rank() == 0) {
    std::string spread;
    for (size_t k = 0; k < r.per_rank.size(); ++k) spread += (k ? " " : "") + std::to_string(r.per_rank[k]);
    std::printf("%lld scenes: %lld computed (whole scenes per rank: %s), %lld kept from an earlier run, %lld failed, "
                "%.2f s, %d ranks x %d threads\n",
                (long long)r.scenes, (long long)std::accumulate(r.per_rank.begin(), r.per_rank.end(), int64_t{0}),
                spread.c_str(), (long long)r.kept, (long long)r.failed, r.seconds, world.size(), threads);
    finish_folder(o, jobs, model, r.failed);
  }
  if (r.failed > 0) throw Error(std::to_string(r.failed) + " of " + std::to_string(r.scenes) + " scenes failed (above)");
}

// The images through the ranks, each image's outputs committed.
void run_images(const InferOptions& o, parallel::Communicator& world) {
  const bool root = world.rank() == 0;
  PlannedInputs inputs = plan_inputs(o);
  // More scenes than ranks: each rank takes whole scenes; otherwise the ranks share each one.
  const bool whole_scenes = inputs.folder && o.sp == 1 && int64_t(inputs.jobs.size()) >= world.size();
  check_spatial_flags(o, world, whole_scenes);
  const int threads = configure_threads(o.threads);
  tile_choice_options(o, world);  // checked before any inference
  check_inputs(o, inputs);
  size_scenes(inputs);
  const Model model = load_model(o);
  if (root && model.loaded.net)
    std::printf("infer: %s\n",  // stdout, with the summary lines: stderr holds only warnings and the one error line
                describe_classes(model.class_names(), model.loaded.meta.class_colors, model.loaded.meta.background).c_str());
  const CpuRunMemoryScope memory(/*mmap_threshold=*/0);  // one arena, glibc's threshold; activations reused from tile to tile
  const OperatorProfile profile(o.profile, root);
  if (whole_scenes) return run_whole_scenes(o, model, inputs.jobs, world, threads);
  for (const auto& job : inputs.jobs) infer_image(o, model, job, world, threads, inputs.folder);
  if (inputs.folder && root) finish_folder(o, inputs.jobs, model, 0);
}

}  // namespace

InferJob::InferJob(InferOptions options) : options_(std::move(options)) { options_.validate(); }

void InferJob::run(parallel::Communicator& world) {
  const PacsExchange pacs(options_);  // --input dicomweb://: the series retrieved into a temporary folder
  try {
    run_images(options_, world);
  } catch (const Error& e) {
    throw Error(pacs.as_given(e.what()));  // errors name the dicomweb:// address, not the temporary folder
  }
  if (world.rank() == 0) pacs.store(options_);  // --store: only once the outputs have committed
}

}  // namespace tessera::engine
