// The outputs made from an image's finished labels, one sink each: the overlay picture, the
// labels warped to another CRS, their polygons and the STAC item that names them all.
#include <cstdio>
#include <filesystem>

#include "infer_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/engine/overlay.hpp"
#include "tessera/io/reproject.hpp"
#include "tessera/io/stac.hpp"
#include "tessera/io/vector_export.hpp"

namespace tessera::engine::infer {
namespace {

namespace fs = std::filesystem;

bool is_2d(const ImageInfo& image) { return image.extent.size() == 2; }

bool georeferenced_raster(const ImageInfo& image) {
  return is_2d(image) && !image.geo.crs_wkt.empty() && image.geo.geotransform.size() == 6;
}

// --overlay: the image with the labels of its own grid blended on top.
class OverlayOutput final : public ImageOutput {
 public:
  explicit OverlayOutput(std::string png) : png_(std::move(png)) {}
  void check(const InferredImage&, OutputSet* outputs) const override {
    if (outputs) outputs->stage(png_);
  }
  void write(const InferredImage& image, WrittenLabels& labels, OutputSet& outputs) override {
    write_overlay_png(image.source->info().path, labels.source_grid, outputs.stage(png_), image.style);
    std::printf("overlay: %s\n", png_.c_str());
  }

 private:
  std::string png_;
};

// --t-srs: the labels, computed on the input's grid, warped with nearest neighbour.
class ReprojectionOutput final : public ImageOutput {
 public:
  ReprojectionOutput(std::string t_srs, double resolution) : t_srs_(std::move(t_srs)), resolution_(resolution) {}
  void check(const InferredImage& image, OutputSet*) const override {
    const ImageInfo& info = image.source->info();
    if (!is_2d(info) || info.geo.crs_wkt.empty())
      throw Error("--t-srs " + t_srs_ + " needs a georeferenced 2-D raster; " + image.input + " is not one");
  }
  void write(const InferredImage& image, WrittenLabels& labels, OutputSet& outputs) override {
    io::WarpOptions o = io::WarpOptions(t_srs_).with_style(image.style);
    if (resolution_ > 0) o.with_resolution(resolution_);
    labels.labels = outputs.stage(image.output);
    io::warp_label_raster(labels.source_grid, labels.labels, o);
    fs::remove(labels.source_grid);
    labels.source_grid.clear();
    std::printf("%s: labels warped to %s (nearest neighbour)\n", image.output.c_str(), t_srs_.c_str());
  }

 private:
  std::string t_srs_;
  double resolution_;
};

// --vectorize: the whole label raster as polygons (no cut at a tile seam).
class VectorsOutput final : public ImageOutput {
 public:
  VectorsOutput(std::string path, io::VectorizeOptions options, bool progress)
      : path_(std::move(path)), options_(std::move(options)), progress_(progress) {}
  void check(const InferredImage& image, OutputSet* outputs) const override {
    if (!is_2d(image.source->info())) throw Error("--vectorize needs a 2-D raster; " + image.input + " is a volume");
    if (outputs) outputs->stage(path_);
  }
  void write(const InferredImage& image, WrittenLabels& labels, OutputSet& outputs) override {
    ProgressBar bar("vectorize", 100, "%", progress_);
    io::VectorizeOptions o = options_;
    o.with_progress([&](double x) { bar.update(static_cast<int64_t>(x * 100)); });
    const io::VectorizeReport r = io::vectorize_labels(labels.labels, outputs.stage(path_), o);
    bar.finish();
    std::printf("%s -> %s: %lld polygons", image.output.c_str(), path_.c_str(), (long long)r.features);
    if (o.min_area > 0) std::printf(" (%lld below --min-area dropped)", (long long)r.dropped);
    std::printf(", %.2f s\n", r.seconds);
  }

 private:
  std::string path_;
  io::VectorizeOptions options_;
  bool progress_;
};

// The media type of a vector output, for its STAC asset.
std::string vector_media_type(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".gpkg") return "application/geopackage+sqlite3";
  if (ext == ".geojson") return "application/geo+json";
  return "application/x-shapefile";
}

// The STAC item of a georeferenced label raster, written last (its presence marks a scene
// done), naming the final paths of the other outputs.
class StacOutput final : public ImageOutput {
 public:
  StacOutput(const InferOptions& o, const Model& model) : o_(o), model_(model) {}
  void check(const InferredImage&, OutputSet*) const override {}
  void write(const InferredImage& image, WrittenLabels&, OutputSet& outputs) override {
    if (!georeferenced_raster(image.source->info())) return;
    io::StacItemOptions item(fs::path(image.output).stem().string(), image.output);
    item.outputs = &outputs;
    item.class_names = model_.class_names();
    item.class_colors = model_.loaded.meta.class_colors;
    item.classes = model_.classes();
    item.model = model_.maker.model;
    item.checkpoint = model_.maker.checkpoint;
    item.source = fs::absolute(image.input).lexically_normal().string();
    if (const auto acquired = io::acquisition_datetime(image.input)) {  // else processing time, said so
      item.datetime = acquired->first;
      item.datetime_source = "acquisition time (" + acquired->second + ")";
    }
    item.cog = io::wants_cog(image.output, o_.cog);
    item.relative = o_.stac_relative;
    if (image.in_folder) item.collection = fs::path(image.output).parent_path().filename().string();
    else add_assets(item);
    outputs.stage(io::stac_item_path(image.output));
    io::write_stac_item(io::stac_item_path(image.output), item);
  }

 private:
  void add_assets(io::StacItemOptions& item) const {
    if (!o_.probabilities.empty())
      item.extra_assets.push_back({"probabilities", o_.probabilities, "image/tiff; application=geotiff",
                                   "class probabilities", {"data", "probabilities"}});
    if (!o_.vectorize.empty())
      item.extra_assets.push_back({"polygons", o_.vectorize, vector_media_type(o_.vectorize), "label polygons",
                                   {"data", "labels", "labels-vector"}});
    if (!o_.overlay.empty())
      item.extra_assets.push_back({"overlay", o_.overlay, "image/png", "labels over the image", {"overview", "visual"}});
  }
  const InferOptions& o_;
  const Model& model_;
};

// Class 0's polygons too with --vector-background or when the model says class 0 is a class
// like the others (data.background: none).
io::VectorizeOptions vectorize_options(const InferOptions& o, const Model& model) {
  return io::VectorizeOptions()
      .with_class_names(model.class_names())
      .with_min_area(o.min_area)
      .with_simplify(o.simplify)
      .with_background(o.vector_background || model.loaded.meta.background == "none");
}

}  // namespace

std::vector<std::unique_ptr<ImageOutput>> image_outputs(const InferOptions& o, const Model& model) {
  std::vector<std::unique_ptr<ImageOutput>> out;
  if (!o.overlay.empty()) out.push_back(std::make_unique<OverlayOutput>(o.overlay));
  if (!o.t_srs.empty()) out.push_back(std::make_unique<ReprojectionOutput>(o.t_srs, o.tr));
  if (!o.vectorize.empty())
    out.push_back(std::make_unique<VectorsOutput>(o.vectorize, vectorize_options(o, model), o.progress));
  out.push_back(std::make_unique<StacOutput>(o, model));
  return out;
}

}  // namespace tessera::engine::infer
