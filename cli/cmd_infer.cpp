// tessera infer: streaming tiled inference of one image or a folder of images.
// A folder of at least as many scenes as ranks is spread as whole scenes (cli/infer_scenes.hpp);
// --t-srs warps the labels, --mosaic joins a folder's labels, and every georeferenced label
// raster gets a STAC item (io/reproject.hpp, io/stac.hpp).
// With --run-dir (required under mpirun with more than one rank) the tiles are spread over
// the ranks, kept in RUN/tiles/ as they finish, and assembled into the output by rank 0;
// a rerun resumes from the tiles already there (parallel/sample_parallel.hpp).
// --vectorize polygonizes the finished label mosaic as a whole (io/vector_export.hpp), so no
// polygon is cut at a tile seam; --probabilities also writes the per-class softmax
// (one process, or rank 0 under --sp: io/probability_raster.hpp). Label rasters carry the
// checkpoint's class names, an attribute table and a QGIS .qml; --cog (or a .cog.tif name)
// makes Cloud-Optimized GeoTIFFs (io/label_style.hpp).
// With --sp P (mpirun -np P) the ranks share every tile instead: each runs the network on its
// block of the tile (halo exchanges, whole-image norm statistics: parallel/spatial.hpp) and
// gathers the tile's logits, so a tile — or a whole volume as one tile — P times larger than a
// rank's memory allows gives the labels of one process with that tile; rank 0 writes them.
#include <malloc.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "commands.hpp"
#include "infer_scenes.hpp"
#include "operator_profile.hpp"
#include "msd_dataset.hpp"
#include "model_options.hpp"
#include "overlay.hpp"
#include "preprocessing.hpp"
#include "tessera/core/checkpoint.hpp"
#include "tessera/core/cpu_tensor_cache.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/tensor_io.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/tile_choice.hpp"
#include "tessera/io/label_style.hpp"
#include "tessera/io/normalization.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/probability_raster.hpp"
#include "tessera/io/reproject.hpp"
#include "tessera/io/resample.hpp"
#include "tessera/io/stac.hpp"
#include "tessera/io/vector_export.hpp"
#include "tessera/run/output_set.hpp"
#include "tessera/run/process_memory.hpp"
#include "tessera/parallel/modes/device_monitor.hpp"
#include "tessera/parallel/comm/model_sync.hpp"
#include "tessera/parallel/plan/partition.hpp"
#include "tessera/parallel/plan/plan.hpp"
#include "tessera/parallel/plan/spatial_cost.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/parallel/modes/sample_parallel.hpp"
#include "tessera/parallel/modes/spatial.hpp"
#include "tessera/parallel/modes/spatial_hooks.hpp"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

struct Flags {
  std::string checkpoint, init, input, output, overlay, run_dir, vectorize, probabilities, series;
  double min_area = 0, simplify = 0;
  bool vector_background = false;
  ModelFlags model;
  uint64_t seed = 0;
  std::string tile = "auto", memory_budget;
  int batch = 1;
  int sp = 1;
  std::string sp_mesh;
  std::optional<int> threads;
  bool no_progress = false;
  bool cog = false;
  std::string t_srs, mosaic;
  std::string precision = "fp32";  ///< fp32, or bf16: weights and activations in bfloat16, logits back in fp32
  std::optional<double> tr;
  std::string profile;  ///< Chrome trace of rank 0's operators (empty: none)
};

bool is_image_file(const fs::path& p) {
  static const char* exts[] = {".tif", ".tiff", ".vrt", ".img", ".jp2", ".nii", ".gz", ".nrrd", ".nhdr", ".mha", ".mhd"};
  std::string e = p.extension().string();  // any case: SCENE.TIF is a scene
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return std::any_of(std::begin(exts), std::end(exts), [&](const char* x) { return e == x; });
}

// A dataset folder (dataset.json: MSD / nnU-Net) is its test images, written as <case><ending>;
// a folder holding image files is a batch of scenes; any other folder is a DICOM series.
std::vector<std::pair<std::string, std::string>> plan_outputs(const Flags& f) {
  if (fs::is_regular_file(fs::path(f.input) / "dataset.json")) {  // an MSD / nnU-Net folder: its test images
    fs::create_directories(f.output);
    return msd_inference_jobs(f.input, f.output);
  }
  if (fs::is_directory(f.input)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(f.input))
      if (e.is_regular_file() && is_image_file(e.path())) files.push_back(e.path());
    if (!files.empty()) {
      std::sort(files.begin(), files.end());
      fs::create_directories(f.output);
      std::vector<std::pair<std::string, std::string>> jobs;
      for (const auto& p : files) {
        const std::string name = p.filename().string();
        jobs.emplace_back(p.string(), (fs::path(f.output) / name).string());
      }
      return jobs;
    }
  }
  return {{f.input, f.output}};
}

// Flags that only make sense with a vector or probability output, checked before any inference.
io::VectorizeOptions vectorize_options(const Flags& f, const std::vector<std::string>& class_names) {
  if (f.vectorize.empty() && (f.min_area != 0 || f.simplify != 0 || f.vector_background))
    throw Error("--min-area, --simplify and --vector-background need --vectorize OUT.gpkg");
  io::VectorizeOptions o = io::VectorizeOptions()
                               .with_class_names(class_names)
                               .with_min_area(f.min_area)
                               .with_simplify(f.simplify)
                               .with_background(f.vector_background);
  try {
    o.validate();
  } catch (const Error& e) {  // name the flag the user typed, not the struct field
    std::string msg = e.what();
    if (msg.rfind("min_area", 0) == 0) msg.replace(0, 8, "--min-area");
    else if (msg.rfind("simplify", 0) == 0) msg.insert(0, "--");
    throw Error(msg);
  }
  if (!f.vectorize.empty()) io::vector_driver_for(f.vectorize);
  return o;
}

// Polygons of `labels` (staged) into `polygons` (staged); the summary names the final files.
void vectorize(const Flags& f, const OutputSet& outputs, const std::string& labels, const std::string& polygons,
               io::VectorizeOptions options) {
  ProgressBar bar("vectorize", 100, "%", !f.no_progress);
  options.with_progress([&](double x) { bar.update(static_cast<int64_t>(x * 100)); });
  const io::VectorizeReport r = io::vectorize_labels(labels, polygons, options);
  bar.finish();
  std::printf("%s -> %s: %lld polygons", outputs.final_of(labels).c_str(), f.vectorize.c_str(), (long long)r.features);
  if (f.min_area > 0) std::printf(" (%lld below --min-area dropped)", (long long)r.dropped);
  std::printf(", %.2f s\n", r.seconds);
}

// --tile and --memory-budget as options, checked before any inference. The default budget
// is a share of the memory this node has free, split among its ranks.
TileChoiceOptions tile_choice_options(const Flags& f, parallel::Communicator& world) {
  TileChoiceOptions o;
  o.tile = parse_tile_option(f.tile);
  if (!f.memory_budget.empty()) {
    if (o.tile > 0) throw Error("--memory-budget " + f.memory_budget + ": only used with --tile auto");
    o.memory_budget = parse_memory_size(f.memory_budget);
  } else if (o.tile == 0) {
    o.memory_budget = default_memory_budget(parallel::launch_info().local_size);
  }
  if (!f.run_dir.empty()) o.min_tiles = world.size();  // work for every rank
  o.validate();
  return o;
}

// The tile for one image: predicted from the image and the model (the planner's inference
// memory model on top of what this process holds already), the same on every rank: the
// smallest any rank chose, as each rank's budget is its own node's.
TileChoice resolve_tile(const TileChoiceOptions& o, const UNetOptions& model, const Index& extent, int batch,
                        parallel::Communicator& world) {
  const int64_t baseline = resident_bytes();
  TileChoice c = choose_tile(o, extent, unet_alignment(model), [&](const Index& steps) {
    return baseline + inference_bytes(model, steps, batch);
  });
  if (world.size() > 1) {
    const int64_t least = world.allgather(torch::tensor({c.tile})).min().item<int64_t>();
    if (least != c.tile) {
      c.tile = least;
      c.steps = clamped_steps(extent, least, unet_alignment(model));
      c.reason += "; smaller on another rank";
    }
  }
  return c;
}

// What --sp refuses before any image is read: a rank count other than --sp (inference does
// not combine spatial with other parallel axes) and sample-parallel --run-dir.
// `whole_scenes`: a folder of at least as many scenes as ranks, which the ranks take whole.
void check_spatial_flags(const Flags& f, const parallel::Communicator& world, bool whole_scenes) {
  const std::string sp = "--sp " + std::to_string(f.sp);
  if (f.sp < 1) throw Error(sp + ": must be >= 1");
  if (!f.sp_mesh.empty() && f.sp == 1) throw Error("--sp-mesh " + f.sp_mesh + ": needs --sp N (the mesh's product)");
  if (f.sp == 1) {
    if (world.size() > 1 && f.run_dir.empty() && !whole_scenes)
      throw Error("infer: " + std::to_string(world.size()) + " ranks need --run-dir RUN (tiles spread over the ranks, "
                  "finished ones kept in RUN/tiles/), --sp " + std::to_string(world.size()) +
                  " (every tile split over the ranks) or a folder of at least " + std::to_string(world.size()) +
                  " scenes (whole scenes per rank)");
    return;
  }
  if (world.size() != f.sp)
    throw Error(sp + ": needs exactly " + std::to_string(f.sp) + " ranks (mpirun -np " + std::to_string(f.sp) +
                "), got " + std::to_string(world.size()) + "; inference combines --sp with no other parallel axis");
  if (!f.run_dir.empty())
    throw Error(sp + ": not with --run-dir " + f.run_dir + " (sample-parallel inference spreads whole tiles over the "
                "ranks; use one of them)");
}

// The blocks of every tile with --sp S: --sp-mesh, or S blocks along the first axis.
SpatialMesh spatial_mesh(const Flags& f, int dims) {
  SpatialMesh mesh = f.sp_mesh.empty() ? SpatialMesh::along_first_axis(f.sp, dims)
                                                 : SpatialMesh::parse(f.sp_mesh, dims);
  if (mesh.size() != f.sp)
    throw Error("--sp-mesh " + f.sp_mesh + ": " + std::to_string(mesh.size()) + " blocks, but --sp " +
                std::to_string(f.sp) + " (the mesh's product must equal --sp)");
  return mesh;
}

// What a model and tile must be for --sp: `same` padding, and a tile input window that splits
// into blocks starting on multiples of the pooling factor (every window has the same sides).
void check_spatial_model(const Flags& f, const UNetOptions& model, const SpatialMesh& mesh, int64_t tile,
                         const Index& extent) {
  const std::string sp = "--sp " + std::to_string(f.sp);
  if (!model.is_builtin())
    throw Error(sp + ": model " + model.name + " is a registry model; spatial parallelism splits the built-in U-Net's "
                "convolutions (run it without --sp)");
  if (model.padding != Padding::kSame)
    throw Error(sp + ": spatial parallelism needs a `same`-padding U-Net, the model's padding is " +
                to_string(model.padding) + " (use --padding same)");
  const Index sides = make_tile_grid(model, extent, tile).input_sides();
  for (int a = 0; a < mesh.dims(); ++a)
    block_offsets(sides[size_t(a)], mesh.parts[size_t(a)], unet_alignment(model),
                            "--tile " + std::to_string(tile) + " (input window " + std::to_string(sides[size_t(a)]) +
                                " on axis " + std::to_string(a) + ") under " + sp + " (mesh " + mesh.describe() + ")");
}

// The forward runner of --sp: this rank's block of every window of the batch through the
// network under the decomposition, then the whole windows' logits from every rank's block.
ForwardRunner spatial_forward(const parallel::SpatialDecomposition& decomposition) {
  return [&decomposition](UNet& net, const torch::Tensor& input) {
    const int64_t alignment = unet_alignment(net->options());
    const std::vector<int64_t> sides(input.sizes().begin() + 2, input.sizes().end());
    decomposition.check_halo_fits(sides, alignment, (net->options().kernel - 1) / 2);
    const torch::Tensor block = decomposition.scatter(input, 2, alignment).contiguous();
    torch::Tensor logits;
    {
      DecompositionScope scope(decomposition);
      logits = net->forward(block);
    }
    return decomposition.gather(logits.contiguous(), sides, 2, alignment);
  };
}

// The label sink of a rank that computes but does not write (ranks other than 0 under --sp).
class DiscardedLabels final : public LabelSink {
 public:
  void write(const Box&, const Block<uint8_t>&) override {}
  void commit() override {}
};

Block<float> to_block_f32(const torch::Tensor& t) {
  const torch::Tensor c = t.to(torch::kFloat).contiguous();
  Block<float> b(Index(c.sizes().begin(), c.sizes().end()));
  std::copy(c.data_ptr<float>(), c.data_ptr<float>() + c.numel(), b.data.begin());
  return b;
}

// The labels (and --probabilities) of one image through for_each_tile; `writes`: this rank
// writes and commits the files (one process, or rank 0 under --sp), else it only computes.
// `image` is what the network reads: `original`, or `original` resampled to the model's
// spacing, in which case the labels are resampled back onto original's grid (nearest).
InferenceReport infer_to_files(const Flags& f, UNet& net, const ImageSource& image, const ImageSource& original,
                               const Normalization& norm, const std::string& output, const std::string& probabilities,
                               const InferenceOptions& options, bool writes,
                               const std::vector<std::string>& class_names, const io::LabelStyle& style) {
  auto make_parent = [](const std::string& path) {
    if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
  };
  std::unique_ptr<LabelSink> sink = std::make_unique<DiscardedLabels>();
  if (writes) {
    make_parent(output);
    sink = io::create_label_sink(output, original.info(), style);
    if (&image != &original)
      sink = std::make_unique<io::ResamplingLabelSink>(std::move(sink), io::grid_of(image.info()),
                                                       io::grid_of(original.info()));
  }
  if (f.probabilities.empty()) {
    const InferenceReport r = infer_labels(net, image, norm, *sink, options);
    sink->commit();
    return r;
  }
  std::optional<io::ProbabilityRasterWriter> probs;
  if (writes) {
    make_parent(probabilities);
    probs.emplace(io::ProbabilityRasterOptions(probabilities, image.info().extent, image.info().geo,
                                               static_cast<int>(net->options().classes))
                      .with_class_names(class_names)
                      .with_cog(f.cog));
  }
  auto write = [&](const Tile& t, const torch::Tensor& logits, const torch::Tensor& valid) {
    if (!probs) return;
    auto labels = logits.argmax(0).to(torch::kUInt8).masked_fill_(valid.logical_not(), int64_t{kNoDataLabel});
    sink->write(t.inset, to_block_u8(labels));
    auto p = torch::softmax(logits.to(torch::kFloat), 0)
                 .masked_fill_(valid.logical_not().unsqueeze(0), std::numeric_limits<float>::quiet_NaN());
    probs->write(t.inset, to_block_f32(p));
  };
  const InferenceReport r = for_each_tile(net, image, norm, options, write);
  if (probs) probs->commit();
  sink->commit();
  return r;
}

// The media type of a vector output, for its STAC asset.
std::string vector_media_type(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".gpkg") return "application/geopackage+sqlite3";
  if (ext == ".geojson") return "application/geo+json";
  return "application/x-shapefile";
}

// What made the labels, as their STAC items record it (a finished scene is kept only when
// the same maker made it).
SceneMaker scene_maker(const Flags& f, const LoadedCheckpoint& loaded) {
  if (!f.checkpoint.empty())
    return {"U-Net from a checkpoint (step " + std::to_string(loaded.meta.step) + ")",
            fs::absolute(f.checkpoint).lexically_normal().string()};
  const nlohmann::json options = f.model.resolve();  // every override counts: another size is another model
  return {f.model.preset + " " + options.dump() + " (random init, seed " + std::to_string(f.seed) + ")", ""};
}

// The STAC item of a finished label raster (its presence marks the scene done), staged with
// the run's other outputs: it names their final paths.
void write_item(const Flags& f, const LoadedCheckpoint& loaded, const SceneMaker& maker, const std::string& input,
                const std::string& output, bool in_folder, bool extras, OutputSet& outputs) {
  io::StacItemOptions o(fs::path(output).stem().string(), output);
  o.outputs = &outputs;
  o.class_names = loaded.meta.class_names;
  o.classes = static_cast<int>(loaded.net ? loaded.net->options().classes : f.model.resolve().classes);
  o.model = maker.model;
  o.checkpoint = maker.checkpoint;
  o.source = fs::absolute(input).lexically_normal().string();
  o.cog = io::wants_cog(output, f.cog);
  if (in_folder) o.collection = fs::path(output).parent_path().filename().string();
  if (extras && !f.probabilities.empty())
    o.extra_assets.push_back({"probabilities", f.probabilities, "image/tiff; application=geotiff", "class probabilities",
                              {"data", "probabilities"}});
  if (extras && !f.vectorize.empty())
    o.extra_assets.push_back({"polygons", f.vectorize, vector_media_type(f.vectorize), "label polygons",
                              {"data", "labels", "labels-vector"}});
  if (extras && !f.overlay.empty())
    o.extra_assets.push_back({"overlay", f.overlay, "image/png", "labels over the image", {"overview", "visual"}});
  outputs.stage(io::stac_item_path(output));
  io::write_stac_item(io::stac_item_path(output), o);
}

// The labels of one image: through this group's ranks (the whole world, or one rank for a
// whole scene), then, on the group's rank 0, --t-srs, the extras and the STAC item.
void infer_image(const Flags& f, const LoadedCheckpoint& loaded, const io::VectorizeOptions& vector_options,
                 const SceneMaker& maker, const std::string& input, const std::string& output,
                 parallel::Communicator& group, int threads, bool in_folder) {
  const bool root = group.rank() == 0;
  const std::unique_ptr<ImageSource> opened = io::open_image(input, io::ImageOpenOptions().with_series_uid(f.series));
  // Volumes run on the grid the model was trained at (the checkpoint's spacing); their labels
  // go back onto the input's own grid (infer_to_files).
  const std::unique_ptr<ImageSource> resampled =
      loaded.net ? to_network_grid(*opened, loaded.meta.resampling, /*is_labels=*/false) : nullptr;
  const ImageSource* image = resampled ? resampled.get() : opened.get();
  if (resampled && !f.run_dir.empty())
    throw Error("--run-dir " + f.run_dir + ": " + input + " is resampled to the model's spacing (" +
                describe(loaded.meta.resampling) + "); its tiles cannot be kept on the input's grid, run without --run-dir");
  if (resampled && root)
    std::fprintf(stderr, "infer: %s resampled to %s, %s voxels (labels back onto its own %s)\n", input.c_str(),
                 describe(loaded.meta.resampling).c_str(), to_string(image->info().extent).c_str(),
                 to_string(opened->info().extent).c_str());
  const Index& extent = image->info().extent;
  if (!f.vectorize.empty() && extent.size() != 2) throw Error("--vectorize needs a 2-D raster; " + input + " is a volume");
  if (!f.probabilities.empty() && extent.size() != 2)
    throw Error("--probabilities needs a 2-D raster; " + input + " is a volume");
  if (f.cog && extent.size() != 2) throw Error("--cog needs a 2-D raster; " + input + " is a volume");
  if (!f.t_srs.empty() && (extent.size() != 2 || image->info().geo.crs_wkt.empty()))
    throw Error("--t-srs " + f.t_srs + " needs a georeferenced 2-D raster; " + input + " is not one");
  UNet net = loaded.net;
  Normalization norm = io::resolve_normalization(loaded.meta.norm, *image);
  if (!net) {
    UNetOptions o = f.model.resolve();
    o.dims = static_cast<int>(extent.size());
    o.in_channels = image->info().channels;  // random init follows the input's bands
    torch::manual_seed(f.seed);
    net = UNet(o);
    norm = io::default_normalization(*image);
  }
  const auto style = io::LabelStyle()
                         .with_class_names(loaded.meta.class_names)
                         .with_classes(static_cast<int>(net->options().classes))
                         .with_cog(f.cog);
  // Every output of this image is staged and committed together at the end (or not at all).
  OutputSet outputs;
  auto staged = [&](const std::string& path) { return path.empty() || !root ? path : outputs.stage(path); };
  const std::string staged_output = staged(output), staged_probabilities = staged(f.probabilities),
                    staged_overlay = staged(f.overlay), staged_polygons = staged(f.vectorize);
  // With --t-srs the network labels the input's grid (a temporary) and the labels are warped.
  const bool warp = !f.t_srs.empty();
  const std::string labels = warp ? staged_output + ".partial-source-grid.tif" : staged_output;
  const io::LabelStyle labels_style = warp ? io::LabelStyle::bare() : style;
  std::optional<SpatialMesh> mesh;
  if (f.sp > 1) mesh = spatial_mesh(f, static_cast<int>(extent.size()));
  const TileChoiceOptions tile_options = tile_choice_options(f, group);
  TileChoice tile = resolve_tile(tile_options, net->options(), extent, f.batch, group);
  // The memory model predicts one process running the whole tile; a rank of --sp holds a
  // block of the activations but the whole tile's input and logits, which it does not model.
  const int64_t whole = *std::max_element(extent.begin(), extent.end()) + unet_alignment(net->options());
  if (mesh && tile_options.tile == 0 && tile.steps != clamped_steps(extent, whole, unet_alignment(net->options())))
    tile.reason += "; one rank's choice: --sp does not enlarge it, give --tile";
  const bool show_progress = !f.no_progress && (root || !mesh) && !(in_folder && parallel::world().size() > 1);
  auto options = InferenceOptions().with_tile(tile.tile).with_batch(f.batch).with_progress(show_progress);
  if (f.precision == "bf16") {
    if (mesh) throw Error("--precision bf16: not with --sp (its halo exchange is fp32)");
    if (extent.size() == 3 && !torch::cuda::is_available())
      throw Error("--precision bf16: " + input + " is a volume, and this LibTorch has no bfloat16 3-D max pooling on "
                  "the CPU; use fp32");
    // The weights in bfloat16 (idempotent: every image of a folder shares the loaded model);
    // inputs are cast per batch, logits come back in fp32.
    net->to(torch::kBFloat16);
    options.with_forward([](UNet& n, const torch::Tensor& x) { return n->forward(x.to(torch::kBFloat16)).to(torch::kFloat); });
  }
  std::optional<parallel::SpatialDecomposition> decomposition;  // --sp: this rank's block of every tile
  if (mesh) {
    check_spatial_model(f, net->options(), *mesh, tile.tile, extent);
    // Rank 0's weights on every rank: a checkpoint or the same seed give them already; this
    // makes it a guarantee rather than an assumption about the random generator.
    parallel::broadcast_module(*net, {&group});
    decomposition.emplace(group, *mesh);
    options.with_forward(spatial_forward(*decomposition));
  }
  if (!f.run_dir.empty()) {
    parallel::SampleParallelOptions sp;
    sp.run_dir = f.run_dir;
    sp.inference = options;
    sp.assemble_into = labels;
    parallel::DeviceMonitorOptions mo;
    mo.run_dir = f.run_dir;
    mo.rank = parallel::world().rank();
    parallel::DeviceMonitor monitor(mo);
    monitor.set_phase("infer");
    const auto r = parallel::infer_sample_parallel(net, *image, norm, warp ? output + ".partial-source-grid.tif" : output, group, sp,
                                                   [&](int64_t done) { monitor.set_tiles_done(done); });
    // The tiles' mosaic lists the ids it holds as "class <id>"; the model's names, every class
    // and --cog need one more pass over it.
    if (root && extent.size() == 2 && !warp) io::restyle_label_raster(labels, style);
    monitor.set_phase("done");
    torch::Tensor per_rank = group.allgather(torch::tensor({r.tiles_here}));
    if (!root) return;
    std::string spread;
    for (int k = 0; k < group.size(); ++k) spread += (k ? " " : "") + std::to_string(per_rank[k].item<int64_t>());
    std::printf("%s -> %s: %lld tiles (%lld kept from an earlier run; per rank: %s), %s, %.2f s, %d ranks x %d "
                "threads\n",
                input.c_str(), output.c_str(), (long long)r.tiles, (long long)r.tiles_skipped, spread.c_str(),
                tile.summary().c_str(), r.seconds, group.size(), threads);
  } else {
    const InferenceReport r = infer_to_files(f, net, *image, *opened, norm, labels, staged_probabilities, options, root,
                                             loaded.meta.class_names, labels_style);
    if (!root) return;
    std::string spatial;
    if (mesh) spatial = ", spatial " + std::to_string(f.sp) + " (mesh " + mesh->describe() + ") on " +
                        std::to_string(group.size()) + " ranks x";
    std::printf("%s -> %s: %lld tiles, %s, %.2f s, %.3f Mpx/s, %.2f useful GFLOP/s, tiling overhead %.2fx%s %d "
                "threads\n",
                input.c_str(), output.c_str(), (long long)r.tiles, tile.summary().c_str(), r.seconds,
                r.pixels / 1e6 / r.seconds, r.useful_gflops / r.seconds, r.overhead,
                spatial.empty() ? "," : spatial.c_str(), threads);
    if (!f.probabilities.empty()) std::printf("probabilities: %s\n", f.probabilities.c_str());
  }
  if (!f.overlay.empty()) {
    write_overlay_png(opened->info().path, labels, staged_overlay);
    std::printf("overlay: %s\n", f.overlay.c_str());
  }
  if (warp) {
    io::WarpOptions warp_options = io::WarpOptions(f.t_srs).with_style(style);
    if (f.tr) warp_options.with_resolution(*f.tr);
    io::warp_label_raster(labels, staged_output, warp_options);
    fs::remove(labels);
    std::printf("%s: labels warped to %s (nearest neighbour)\n", output.c_str(), f.t_srs.c_str());
  }
  if (!f.vectorize.empty()) vectorize(f, outputs, staged_output, staged_polygons, vector_options);
  if (extent.size() == 2 && !image->info().geo.crs_wkt.empty() && image->info().geo.geotransform.size() == 6)
    write_item(f, loaded, maker, input, output, in_folder, !in_folder, outputs);
  outputs.commit();
  std::fflush(stdout);
}

// Checks of the folder-wide flags before any inference: --mosaic needs one CRS (or --t-srs).
void check_scene_flags(const Flags& f, const std::vector<SceneJob>& jobs, bool folder) {
  if (!f.t_srs.empty()) io::check_target_srs(f.t_srs);
  if (f.tr && f.t_srs.empty()) throw Error("--tr " + std::to_string(*f.tr) + ": needs --t-srs");
  if (f.tr && !(*f.tr > 0 && std::isfinite(*f.tr))) throw Error("--tr: must be a positive pixel size, got " + std::to_string(*f.tr));
  if (!f.t_srs.empty() && !f.probabilities.empty())
    throw Error("--probabilities " + f.probabilities + ": not with --t-srs (probabilities stay on the input's grid)");
  if (f.mosaic.empty()) return;
  if (!folder) throw Error("--mosaic " + f.mosaic + ": needs --input DIR, a folder of scenes");
  const std::string ext = fs::path(f.mosaic).extension().string();
  if (ext != ".vrt" && ext != ".tif" && ext != ".tiff")
    throw Error("--mosaic " + f.mosaic + ": unknown mosaic format '" + ext + "' (use .vrt or .tif)");
  if (!f.t_srs.empty()) return;
  std::string first;
  for (const auto& job : jobs) {
    const std::string crs = io::raster_crs_name(job.input);
    if (first.empty()) first = crs;
    else if (crs != first)
      throw Error("--mosaic " + f.mosaic + ": the scenes are in " + first + " and " + crs + " (" + job.input +
                  "); give --t-srs EPSG:xxxx to warp them to one CRS");
  }
}

// After a folder of scenes: the STAC collection of the finished ones and --mosaic (rank 0).
void finish_folder(const Flags& f, const std::vector<SceneJob>& jobs, const LoadedCheckpoint& loaded,
                   int64_t failed) {
  std::vector<std::string> items, labels;
  for (const auto& job : jobs)
    if (fs::exists(io::stac_item_path(job.output))) {
      items.push_back(io::stac_item_path(job.output));
      labels.push_back(job.output);
    }
  if (!items.empty()) {
    const std::string collection = (fs::path(f.output) / "collection.json").string();
    io::write_stac_collection(collection, fs::path(f.output).filename().string(),
                              "Tessera label rasters of the scenes in " + f.input, items);
    std::printf("STAC collection: %s (%zu items)\n", collection.c_str(), items.size());
  }
  if (f.mosaic.empty()) return;
  if (failed > 0) throw Error("--mosaic " + f.mosaic + ": not built, " + std::to_string(failed) + " scenes failed");
  const auto style = io::LabelStyle()
                         .with_class_names(loaded.meta.class_names)
                         .with_classes(static_cast<int>(loaded.net ? loaded.net->options().classes
                                                                   : f.model.resolve().classes))
                         .with_cog(f.cog);
  io::build_scene_mosaic(labels, f.mosaic, style);
  std::printf("mosaic: %s (%zu scenes)\n", f.mosaic.c_str(), labels.size());
}

void run(const Flags& f) {
  if (f.checkpoint.empty() == f.init.empty())
    throw Error("infer: give exactly one of --checkpoint CKPT or --init random (with --model PRESET)");
  if (!f.init.empty() && f.init != "random") throw Error("--init '" + f.init + "': only 'random' is supported");
  // One malloc arena: the reader thread's freed window buffers are reused by the network
  // instead of pinning a second arena's pages (measured: −15% peak RSS, same speed).
  mallopt(M_ARENA_MAX, 1);
  parallel::Communicator& world = parallel::world();
  const bool root = world.rank() == 0;
  const auto planned = plan_outputs(f);
  const bool folder = planned.size() != 1 || planned.front().second != f.output;
  // More scenes than ranks: each rank takes whole scenes; otherwise the ranks share each one.
  const bool whole_scenes = folder && f.sp == 1 && int64_t(planned.size()) >= world.size();
  check_spatial_flags(f, world, whole_scenes);
  const int threads = configure_threads(f.threads.value_or(0));
  tile_choice_options(f, world);  // checked before any inference

  if (!f.vectorize.empty() && folder)
    throw Error("--vectorize " + f.vectorize + ": works on one input image, not a folder of scenes");
  if (!f.probabilities.empty() && folder)
    throw Error("--probabilities " + f.probabilities + ": works on one input image, not a folder of scenes");
  if (!f.probabilities.empty() && !f.run_dir.empty())
    throw Error("--probabilities " + f.probabilities + ": not with --run-dir (one process, or --sp N)");
  if (!f.probabilities.empty() && io::is_volume_path(f.probabilities))
    throw Error("--probabilities " + f.probabilities + ": probabilities are a GeoTIFF (.tif)");
  std::vector<SceneJob> jobs;
  for (const auto& [input, output] : planned) {
    SceneJob job{input, output, 0};
    if (folder) {
      const Index extent = io::open_image(input)->info().extent;
      job.pixels = std::accumulate(extent.begin(), extent.end(), int64_t{1}, std::multiplies<>());
    }
    jobs.push_back(job);
  }
  check_scene_flags(f, jobs, folder);

  LoadedCheckpoint loaded;
  if (!f.checkpoint.empty()) loaded = load_checkpoint(f.checkpoint);
  const io::VectorizeOptions vector_options = vectorize_options(f, loaded.meta.class_names);
  const SceneMaker maker = scene_maker(f, loaded);
  const CpuTensorCacheScope tensor_cache;  // activations reused from tile to tile, not re-faulted
  const OperatorProfile profile(f.profile, root);
  if (!whole_scenes) {
    for (const auto& job : jobs)
      infer_image(f, loaded, vector_options, maker, job.input, job.output, world, threads, folder);
    if (folder && root) finish_folder(f, jobs, loaded, 0);
    return;
  }
  const auto alone = parallel::make_self_communicator();  // a whole scene runs on one rank
  const SceneBatchReport r = run_whole_scenes(jobs, maker, world, [&](const SceneJob& job) {
    infer_image(f, loaded, vector_options, maker, job.input, job.output, *alone, threads, true);
    if (world.size() > 1) std::printf("%s: rank %d\n", job.output.c_str(), world.rank());
  });
  if (root) {
    std::string spread;
    for (size_t k = 0; k < r.per_rank.size(); ++k) spread += (k ? " " : "") + std::to_string(r.per_rank[k]);
    std::printf("%lld scenes: %lld computed (whole scenes per rank: %s), %lld kept from an earlier run, %lld failed, "
                "%.2f s, %d ranks x %d threads\n",
                (long long)r.scenes, (long long)std::accumulate(r.per_rank.begin(), r.per_rank.end(), int64_t{0}),
                spread.c_str(), (long long)r.kept,
                (long long)r.failed, r.seconds, world.size(), threads);
    finish_folder(f, jobs, loaded, r.failed);
  }
  if (r.failed > 0) throw Error(std::to_string(r.failed) + " of " + std::to_string(r.scenes) + " scenes failed (above)");
}

}  // namespace

void register_infer(CLI::App& app) {
  auto* cmd = app.add_subcommand("infer", "Tiled inference: image (or folder) -> label raster / label volume");
  cmd->footer(
      "A folder of images is a batch of scenes: under mpirun with at least as many scenes as ranks, each rank "
      "takes whole scenes, largest first; a rerun keeps the finished scenes (labels + STAC item) and computes "
      "the rest. Every georeferenced label raster gets a STAC item <output minus .tif>.stac.json; a folder "
      "also gets collection.json.\n"
      "Examples:\n"
      "  tessera infer --checkpoint model.pt --input scene.tif --output labels.cog.tif --probabilities probs.tif\n"
      "  mpirun -np 4 tessera infer --checkpoint model.pt --input scenes/ --output labels/ --mosaic labels/all.vrt "
      "--t-srs EPSG:3857");
  static Flags f;
  cmd->add_option("--checkpoint", f.checkpoint, "Checkpoint written by `tessera train`");
  cmd->add_option("--init", f.init, "'random': an untrained network (for benchmarks), with --model and --seed");
  f.model.add_to(cmd);
  cmd->add_option("--seed", f.seed, "Seed for --init random");
  cmd->add_option("--input", f.input, "GeoTIFF / NIfTI / NRRD / MHA / DICOM folder, or a folder of images")->required();
  cmd->add_option("--output", f.output,
                  "Label GeoTIFF (.tif; .cog.tif: Cloud-Optimized) or label volume (.nii.gz ...), or a folder. "
                  "A GeoTIFF carries the class names (GDAL categories and an attribute table Value, Class_Name, "
                  "Red, Green, Blue, Count in <output>.aux.xml), the colour table and nodata 255, and gets a "
                  "QGIS style <output minus .tif>.qml beside it")
      ->required();
  cmd->add_option("--tile", f.tile,
                  "Inset side S kept per tile (multiple of 2^(L-1)), or 'auto': the largest S whose predicted "
                  "memory (the planner's inference model) fits --memory-budget. Never larger than the image "
                  "(clamped per axis to it, rounded up to 2^(L-1)); never changes the answer")
      ->capture_default_str();
  cmd->add_option("--memory-budget", f.memory_budget,
                  "With --tile auto: peak memory the process may use, e.g. 2GiB, 512MiB or a number of MiB "
                  "(default: half the free RAM, MemAvailable, split among the ranks of a node; inference runs "
                  "on the CPU)");
  cmd->add_option("--batch", f.batch, "Tiles per forward pass")->capture_default_str();
  cmd->add_option("--series", f.series,
                  "DICOM: the SeriesInstanceUID to read from a folder holding several series (list them: tessera "
                  "info FOLDER)");
  cmd->add_option("--run-dir", f.run_dir,
                  "Keep finished tiles in RUN/tiles/ (resumable) and spread them over MPI ranks");
  cmd->add_option("--overlay", f.overlay, "Also write a PNG of the image with the labels blended on top");
  cmd->add_option("--vectorize", f.vectorize,
                  "Also polygonize the whole label raster (no cuts at tile seams; 4-connected regions) to "
                  ".gpkg / .geojson / .shp with fields class_id, class_name, area (map units^2); 2-D only");
  cmd->add_option("--min-area", f.min_area, "With --vectorize: drop polygons smaller than A map units^2")
      ->capture_default_str();
  cmd->add_option("--simplify", f.simplify,
                  "With --vectorize: simplify edges, tolerance in map units, topology preserved (0: exact pixel edges)")
      ->capture_default_str();
  cmd->add_flag("--vector-background", f.vector_background, "With --vectorize: also write class 0 polygons");
  cmd->add_option("--probabilities", f.probabilities,
                  "Also write per-class softmax probabilities: Float32 GeoTIFF, band k+1 = class k, NaN where "
                  "the input has no data; 2-D; one process, or rank 0 with --sp (not with --run-dir)");
  cmd->add_flag("--cog", f.cog,
                 "Write the labels (and --probabilities) as Cloud-Optimized GeoTIFFs with internal overviews "
                 "(mode for labels, average for probabilities); also chosen by a .cog.tif output name");
  cmd->add_option("--t-srs", f.t_srs,
                  "Write the labels in this CRS (e.g. EPSG:3857, any CRS GDAL knows): inference runs on the "
                  "input's grid, the labels are warped with nearest neighbour (class ids are never mixed)");
  cmd->add_option("--tr", f.tr, "With --t-srs: target pixel size in the target CRS's units (default: GDAL's choice)");
  cmd->add_option("--mosaic", f.mosaic,
                  "With a folder of scenes: one mosaic of every scene's labels, .vrt (references the scenes' "
                  "label rasters) or .tif; scenes in different CRSs need --t-srs");
  cmd->add_option("--sp", f.sp,
                  "Spatial parallelism: every tile split into N blocks, one per rank (mpirun -np N; world size "
                  "must be N), halos exchanged, rank 0 writes the labels of one process with the same tile. "
                  "For a tile or a whole volume larger than one rank's memory; `same`-padding models only")
      ->capture_default_str();
  cmd->add_option("--sp-mesh", f.sp_mesh,
                  "With --sp: blocks per spatial axis, e.g. 2x2 (product = --sp; default: --sp blocks along the "
                  "first axis, rows or slices)");
  cmd->add_option("--precision", f.precision,
                  "fp32, or bf16: the network in bfloat16 (AVX-512 BF16 / AMX on CPUs that have them, tensor cores "
                  "on GPUs), its logits compared in fp32; labels agree with fp32 up to near-ties")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--threads", f.threads, "Intra-op threads (default: cores / ranks on this node)");
  cmd->add_flag("--no-progress", f.no_progress, "No progress line");
  cmd->add_option("--profile", f.profile,
                  "Write rank 0's operators as a Chrome trace JSON; scripts/profile_summary.py FILE prints where the "
                  "time went");
  cmd->callback([] { run(f); });
}

}  // namespace tessera::cli
