#include "tessera/engine/scene_batch.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include <torch/types.h>

#include "tessera/core/error.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/stac.hpp"
#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::engine {
namespace {

namespace fs = std::filesystem;

std::string absolute(const std::string& path) { return path.empty() ? path : fs::absolute(path).lexically_normal().string(); }

// What a killed run left of an unfinished scene: its outputs' temporaries (".partial" names,
// tessera/run/staged_file.hpp) beside it. Only rank 0 calls this, before any rank starts. (Its
// files in a killed run's staging folders go when the next OutputSet stages into the folder:
// tessera/run/output_set.hpp.)
void remove_temporaries(const std::string& output) {
  const fs::path out(output);
  const std::string labels = out.filename().string() + ".partial";
  const std::string item = fs::path(io::stac_item_path(output)).filename().string() + ".partial";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out.parent_path().empty() ? "." : out.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(labels, 0) == 0 || name.rfind(item, 0) == 0) fs::remove_all(entry.path(), ec);
  }
}

// Every rank learns which scenes are finished: rank 0 looks, the others receive its answer
// (one view of the folder, even if a file system is slow to show another node's writes).
std::vector<bool> finished_scenes(const std::vector<SceneJob>& jobs, const SceneMaker& maker,
                                  parallel::Communicator& world) {
  torch::Tensor done = torch::zeros({int64_t(jobs.size())}, torch::kInt32);
  if (world.rank() == 0)
    for (size_t i = 0; i < jobs.size(); ++i) {
      const std::string why = unfinished_reason(jobs[i], maker);
      if (why.empty()) {
        done[int64_t(i)] = 1;
        std::printf("%s: kept, finished by an earlier run\n", jobs[i].output.c_str());
      } else {
        if (fs::exists(jobs[i].output)) std::printf("%s: recomputed (%s)\n", jobs[i].output.c_str(), why.c_str());
        remove_temporaries(jobs[i].output);
      }
    }
  std::fflush(stdout);
  world.broadcast(done, 0);
  std::vector<bool> finished(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) finished[i] = done[int64_t(i)].item<int32_t>() != 0;
  return finished;
}

}  // namespace

std::vector<size_t> largest_first(const std::vector<SceneJob>& jobs) {
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (jobs[a].pixels != jobs[b].pixels) return jobs[a].pixels > jobs[b].pixels;
    return jobs[a].input < jobs[b].input;
  });
  return order;
}

std::string unfinished_reason(const SceneJob& job, const SceneMaker& maker) {
  if (!fs::exists(job.output)) return "no labels yet";
  const std::string item_path = io::stac_item_path(job.output);
  if (!fs::exists(item_path)) return "no STAC item " + item_path + " (written last)";
  io::StacItemSummary item;
  try {
    item = io::read_stac_item(item_path);
  } catch (const Error& e) {
    return e.what();
  }
  if (item.model != maker.model) return "made by model '" + item.model + "', not '" + maker.model + "'";
  if (absolute(item.checkpoint) != absolute(maker.checkpoint))
    return "made by checkpoint '" + item.checkpoint + "', not '" + maker.checkpoint + "'";
  if (absolute(item.source) != absolute(job.input)) return "made from '" + item.source + "'";
  try {
    const auto labels = io::open_image(job.output);
    const Index& extent = labels->info().extent;
    if (std::vector<int64_t>(extent.begin(), extent.end()) != item.shape)
      return "the labels' shape differs from the STAC item's proj:shape";
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

SceneBatchReport run_whole_scenes(const std::vector<SceneJob>& jobs, const SceneMaker& maker,
                                  parallel::Communicator& world,
                                  const std::function<void(const SceneJob&)>& infer_scene) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<bool> finished = finished_scenes(jobs, maker, world);
  std::vector<size_t> todo;
  for (size_t i : largest_first(jobs))
    if (!finished[i]) todo.push_back(i);

  int64_t here = 0, failed_here = 0;
  {
    const auto counter = world.make_counter();  // freed collectively at the end of this scope
    for (int64_t next = counter->fetch_add(); next < int64_t(todo.size()); next = counter->fetch_add()) {
      const SceneJob& job = jobs[todo[size_t(next)]];
      try {
        infer_scene(job);
        ++here;
      } catch (const std::exception& e) {  // one bad scene does not cost the others
        ++failed_here;
        std::fprintf(stderr, "tessera: error: rank %d: %s: %s\n", world.rank(), job.input.c_str(), e.what());
        std::fflush(stderr);
      }
    }
    world.barrier();
  }
  torch::Tensor mine = torch::tensor({here, failed_here}, torch::kInt64);
  const torch::Tensor all = world.allgather(mine);

  SceneBatchReport report;
  report.scenes = int64_t(jobs.size());
  report.kept = int64_t(std::count(finished.begin(), finished.end(), true));
  for (int r = 0; r < world.size(); ++r) {
    report.per_rank.push_back(all[r][0].item<int64_t>());
    report.failed += all[r][1].item<int64_t>();
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace tessera::engine
