#include <algorithm>
#include <cctype>
#include <filesystem>
#include <numeric>

#include "infer_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/msd_dataset.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/reproject.hpp"

namespace tessera::engine::infer {
namespace {

namespace fs = std::filesystem;

bool is_image_file(const fs::path& p) {
  static const char* exts[] = {".tif", ".tiff", ".vrt", ".img", ".jp2", ".nii", ".gz", ".nrrd", ".nhdr", ".mha", ".mhd"};
  std::string e = p.extension().string();  // any case: SCENE.TIF is a scene
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return std::any_of(std::begin(exts), std::end(exts), [&](const char* x) { return e == x; });
}

std::vector<std::pair<std::string, std::string>> planned_pairs(const InferOptions& o) {
  if (fs::is_regular_file(fs::path(o.input) / "dataset.json")) {  // an MSD / nnU-Net folder: its test images
    fs::create_directories(o.output);
    return msd_inference_jobs(o.input, o.output);
  }
  if (fs::is_directory(o.input)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(o.input))
      if (e.is_regular_file() && is_image_file(e.path())) files.push_back(e.path());
    if (!files.empty()) {
      std::sort(files.begin(), files.end());
      fs::create_directories(o.output);
      std::vector<std::pair<std::string, std::string>> jobs;
      for (const auto& p : files) jobs.emplace_back(p.string(), (fs::path(o.output) / p.filename()).string());
      return jobs;
    }
  }
  return {{o.input, o.output}};
}

// --mosaic: a known format, and one CRS for every scene unless --t-srs warps them to one.
void check_mosaic(const InferOptions& o, const PlannedInputs& inputs) {
  if (o.mosaic.empty()) return;
  if (!inputs.folder) throw Error("--mosaic " + o.mosaic + ": needs --input DIR, a folder of scenes");
  const std::string ext = fs::path(o.mosaic).extension().string();
  if (ext != ".vrt" && ext != ".tif" && ext != ".tiff")
    throw Error("--mosaic " + o.mosaic + ": unknown mosaic format '" + ext + "' (use .vrt or .tif)");
  if (!o.t_srs.empty()) return;
  std::string first;
  for (const auto& job : inputs.jobs) {
    const std::string crs = io::raster_crs_name(job.input);
    if (first.empty()) first = crs;
    else if (crs != first)
      throw Error("--mosaic " + o.mosaic + ": the scenes are in " + first + " and " + crs + " (" + job.input +
                  "); give --t-srs EPSG:xxxx to warp them to one CRS");
  }
}

}  // namespace

PlannedInputs plan_inputs(const InferOptions& o) {
  const auto pairs = planned_pairs(o);
  PlannedInputs p;
  p.folder = pairs.size() != 1 || pairs.front().second != o.output;
  for (const auto& [input, output] : pairs) p.jobs.push_back(SceneJob{input, output, 0});
  return p;
}

void size_scenes(PlannedInputs& inputs) {
  if (!inputs.folder) return;
  for (SceneJob& job : inputs.jobs) {
    const Index extent = io::open_image(job.input)->info().extent;
    job.pixels = std::accumulate(extent.begin(), extent.end(), int64_t{1}, std::multiplies<>());
  }
}

void check_inputs(const InferOptions& o, const PlannedInputs& inputs) {
  if (!o.vectorize.empty() && inputs.folder)
    throw Error("--vectorize " + o.vectorize + ": works on one input image, not a folder of scenes");
  if (!o.probabilities.empty() && inputs.folder)
    throw Error("--probabilities " + o.probabilities + ": works on one input image, not a folder of scenes");
  if (!o.t_srs.empty()) io::check_target_srs(o.t_srs);
  check_mosaic(o, inputs);
}

}  // namespace tessera::engine::infer
