#include <cstdio>
#include <filesystem>

#include "infer_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/reproject.hpp"
#include "tessera/io/stac.hpp"

namespace tessera::engine::infer {

void finish_folder(const InferOptions& o, const std::vector<SceneJob>& jobs, const Model& model, int64_t failed) {
  namespace fs = std::filesystem;
  std::vector<std::string> items, labels;
  for (const auto& job : jobs)
    if (fs::exists(io::stac_item_path(job.output))) {
      items.push_back(io::stac_item_path(job.output));
      labels.push_back(job.output);
    }
  if (!items.empty()) {
    const std::string collection = (fs::path(o.output) / "collection.json").string();
    io::write_stac_collection(collection, fs::path(o.output).filename().string(),
                              "Tessera label rasters of the scenes in " + o.input, items, o.stac_relative);
    std::printf("STAC collection: %s (%zu items)\n", collection.c_str(), items.size());
  }
  if (o.mosaic.empty()) return;
  if (failed > 0) throw Error("--mosaic " + o.mosaic + ": not built, " + std::to_string(failed) + " scenes failed");
  const io::LabelStyle style = model.label_style(o.cog);
  io::build_scene_mosaic(labels, o.mosaic, style);
  std::printf("mosaic: %s (%zu scenes)\n", o.mosaic.c_str(), labels.size());
}

}  // namespace tessera::engine::infer
