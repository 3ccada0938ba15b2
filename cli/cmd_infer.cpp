// tessera infer: streaming tiled inference of one image or a folder of images.
// With --run-dir (required under mpirun with more than one rank) the tiles are spread over
// the ranks, kept in RUN/tiles/ as they finish, and assembled into the output by rank 0;
// a rerun resumes from the tiles already there (parallel/sample_parallel.hpp).
// --vectorize polygonizes the finished label mosaic as a whole (io/vector_export.hpp), so no
// polygon is cut at a tile seam; --probabilities also writes the per-class softmax
// (one process, or rank 0 under --sp: io/probability_raster.hpp).
// With --sp P (mpirun -np P) the ranks share every tile instead: each runs the network on its
// block of the tile (halo exchanges, whole-image norm statistics: parallel/spatial.hpp) and
// gathers the tile's logits, so a tile — or a whole volume as one tile — P times larger than a
// rank's memory allows gives the labels of one process with that tile; rank 0 writes them.
#include <malloc.h>

#include <filesystem>

#include <torch/torch.h>

#include "commands.hpp"
#include "model_options.hpp"
#include "overlay.hpp"
#include "tessera/core/checkpoint.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/tensor_io.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/tile_choice.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/probability_raster.hpp"
#include "tessera/io/vector_export.hpp"
#include "tessera/run/process_memory.hpp"
#include "tessera/parallel/device_monitor.hpp"
#include "tessera/parallel/planner.hpp"
#include "tessera/parallel/runtime.hpp"
#include "tessera/parallel/sample_parallel.hpp"
#include "tessera/parallel/spatial.hpp"
#include "tessera/parallel/spatial_hooks.hpp"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

struct Flags {
  std::string checkpoint, init, input, output, overlay, run_dir, vectorize, probabilities;
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
};

bool is_image_file(const fs::path& p) {
  static const char* exts[] = {".tif", ".tiff", ".vrt", ".img", ".jp2", ".nii", ".gz", ".nrrd", ".nhdr", ".mha", ".mhd"};
  const std::string e = p.extension().string();
  return std::any_of(std::begin(exts), std::end(exts), [&](const char* x) { return e == x; });
}

// A folder holding image files is a batch of scenes; any other folder is a DICOM series.
std::vector<std::pair<std::string, std::string>> plan_outputs(const Flags& f) {
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

void vectorize(const Flags& f, const std::string& labels, io::VectorizeOptions options) {
  ProgressBar bar("vectorize", 100, "%", !f.no_progress);
  options.with_progress([&](double x) { bar.update(static_cast<int64_t>(x * 100)); });
  const io::VectorizeReport r = io::vectorize_labels(labels, f.vectorize, options);
  bar.finish();
  std::printf("%s -> %s: %lld polygons", labels.c_str(), f.vectorize.c_str(), (long long)r.features);
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
    return baseline + parallel::inference_bytes(model, steps, batch);
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
void check_spatial_flags(const Flags& f, const parallel::Communicator& world) {
  const std::string sp = "--sp " + std::to_string(f.sp);
  if (f.sp < 1) throw Error(sp + ": must be >= 1");
  if (!f.sp_mesh.empty() && f.sp == 1) throw Error("--sp-mesh " + f.sp_mesh + ": needs --sp N (the mesh's product)");
  if (f.sp == 1) {
    if (world.size() > 1 && f.run_dir.empty())
      throw Error("infer: " + std::to_string(world.size()) + " ranks need --run-dir RUN (tiles spread over the ranks, "
                  "finished ones kept in RUN/tiles/) or --sp " + std::to_string(world.size()) +
                  " (every tile split over the ranks)");
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
parallel::SpatialMesh spatial_mesh(const Flags& f, int dims) {
  parallel::SpatialMesh mesh = f.sp_mesh.empty() ? parallel::SpatialMesh::along_first_axis(f.sp, dims)
                                                 : parallel::SpatialMesh::parse(f.sp_mesh, dims);
  if (mesh.size() != f.sp)
    throw Error("--sp-mesh " + f.sp_mesh + ": " + std::to_string(mesh.size()) + " blocks, but --sp " +
                std::to_string(f.sp) + " (the mesh's product must equal --sp)");
  return mesh;
}

// What a model and tile must be for --sp: `same` padding, and a tile input window that splits
// into blocks starting on multiples of the pooling factor (every window has the same sides).
void check_spatial_model(const Flags& f, const UNetOptions& model, const parallel::SpatialMesh& mesh, int64_t tile,
                         const Index& extent) {
  const std::string sp = "--sp " + std::to_string(f.sp);
  if (model.padding != Padding::kSame)
    throw Error(sp + ": spatial parallelism needs a `same`-padding U-Net, the model's padding is " +
                to_string(model.padding) + " (use --padding same)");
  const Index sides = make_tile_grid(model, extent, tile).input_sides();
  for (int a = 0; a < mesh.dims(); ++a)
    parallel::block_offsets(sides[size_t(a)], mesh.parts[size_t(a)], unet_alignment(model),
                            "--tile " + std::to_string(tile) + " (input window " + std::to_string(sides[size_t(a)]) +
                                " on axis " + std::to_string(a) + ") under " + sp + " (mesh " + mesh.describe() + ")");
}

// Rank 0's weights on every rank (a checkpoint or the same seed give them already; this makes
// it a guarantee rather than an assumption about the random generator).
void share_weights(UNet& net, parallel::Communicator& world) {
  torch::NoGradGuard no_grad;
  for (auto& p : net->parameters()) world.broadcast(p, 0);
  for (auto& b : net->buffers())
    if (b.defined()) world.broadcast(b, 0);
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
InferenceReport infer_to_files(const Flags& f, UNet& net, const ImageSource& image, const Normalization& norm,
                               const std::string& output, const InferenceOptions& options, bool writes,
                               const std::vector<std::string>& class_names) {
  auto make_parent = [](const std::string& path) {
    if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
  };
  std::unique_ptr<LabelSink> sink = std::make_unique<DiscardedLabels>();
  if (writes) {
    make_parent(output);
    sink = io::create_label_sink(output, image.info());
  }
  if (f.probabilities.empty()) {
    const InferenceReport r = infer_labels(net, image, norm, *sink, options);
    sink->commit();
    return r;
  }
  std::optional<io::ProbabilityRasterWriter> probs;
  if (writes) {
    make_parent(f.probabilities);
    probs.emplace(io::ProbabilityRasterOptions(f.probabilities, image.info().extent, image.info().geo,
                                               static_cast<int>(net->options().classes))
                      .with_class_names(class_names));
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

void run(const Flags& f) {
  if (f.checkpoint.empty() == f.init.empty())
    throw Error("infer: give exactly one of --checkpoint CKPT or --init random (with --model PRESET)");
  if (!f.init.empty() && f.init != "random") throw Error("--init '" + f.init + "': only 'random' is supported");
  // One malloc arena: the reader thread's freed window buffers are reused by the network
  // instead of pinning a second arena's pages (measured: −15% peak RSS, same speed).
  mallopt(M_ARENA_MAX, 1);
  parallel::Communicator& world = parallel::world();
  const bool root = world.rank() == 0;
  check_spatial_flags(f, world);
  const int threads = configure_threads(f.threads.value_or(0));
  const TileChoiceOptions tile_options = tile_choice_options(f, world);
  const auto jobs = plan_outputs(f);

  const bool batch_of_scenes = jobs.size() != 1 || jobs.front().second != f.output;
  if (!f.vectorize.empty() && batch_of_scenes)
    throw Error("--vectorize " + f.vectorize + ": works on one input image, not a folder of scenes");
  if (!f.probabilities.empty() && batch_of_scenes)
    throw Error("--probabilities " + f.probabilities + ": works on one input image, not a folder of scenes");
  if (!f.probabilities.empty() && !f.run_dir.empty())
    throw Error("--probabilities " + f.probabilities + ": not with --run-dir (one process, or --sp N)");
  if (!f.probabilities.empty() && io::is_volume_path(f.probabilities))
    throw Error("--probabilities " + f.probabilities + ": probabilities are a GeoTIFF (.tif)");

  LoadedCheckpoint loaded;
  if (!f.checkpoint.empty()) loaded = load_checkpoint(f.checkpoint);
  const io::VectorizeOptions vector_options = vectorize_options(f, loaded.meta.class_names);
  for (const auto& [input, output] : jobs) {
    auto image = io::open_image(input);
    if (!f.vectorize.empty() && image->info().extent.size() != 2)
      throw Error("--vectorize needs a 2-D raster; " + input + " is a volume");
    if (!f.probabilities.empty() && image->info().extent.size() != 2)
      throw Error("--probabilities needs a 2-D raster; " + input + " is a volume");
    UNet net = loaded.net;
    Normalization norm = loaded.meta.norm;
    if (!net) {
      UNetOptions o = f.model.resolve();
      o.dims = static_cast<int>(image->info().extent.size());
      o.in_channels = image->info().channels;  // random init follows the input's bands
      torch::manual_seed(f.seed);
      net = UNet(o);
      norm = io::default_normalization(*image);
    }
    const Index& extent = image->info().extent;
    std::optional<parallel::SpatialMesh> mesh;
    if (f.sp > 1) mesh = spatial_mesh(f, static_cast<int>(extent.size()));
    TileChoice tile = resolve_tile(tile_options, net->options(), extent, f.batch, world);
    // The memory model predicts one process running the whole tile; a rank of --sp holds a
    // block of the activations but the whole tile's input and logits, which it does not model.
    const int64_t whole = *std::max_element(extent.begin(), extent.end()) + unet_alignment(net->options());
    if (mesh && tile_options.tile == 0 && tile.steps != clamped_steps(extent, whole, unet_alignment(net->options())))
      tile.reason += "; one rank's choice: --sp does not enlarge it, give --tile";
    auto options =
        InferenceOptions().with_tile(tile.tile).with_batch(f.batch).with_progress(!f.no_progress && (root || !mesh));
    std::optional<parallel::SpatialDecomposition> decomposition;  // --sp: this rank's block of every tile
    if (mesh) {
      check_spatial_model(f, net->options(), *mesh, tile.tile, extent);
      share_weights(net, world);
      decomposition.emplace(world, *mesh);
      options.with_forward(spatial_forward(*decomposition));
    }
    if (!f.run_dir.empty()) {
      parallel::SampleParallelOptions sp;
      sp.run_dir = f.run_dir;
      sp.inference = options;
      parallel::DeviceMonitorOptions mo;
      mo.run_dir = f.run_dir;
      mo.rank = world.rank();
      parallel::DeviceMonitor monitor(mo);
      monitor.set_phase("infer");
      const auto r = parallel::infer_sample_parallel(net, *image, norm, output, world, sp,
                                                     [&](int64_t done) { monitor.set_tiles_done(done); });
      monitor.set_phase("done");
      torch::Tensor here = torch::tensor({r.tiles_here});
      torch::Tensor per_rank = world.allgather(here);
      if (root) {
        std::string spread;
        for (int k = 0; k < world.size(); ++k) spread += (k ? " " : "") + std::to_string(per_rank[k].item<int64_t>());
        std::printf("%s -> %s: %lld tiles (%lld kept from an earlier run; per rank: %s), %s, %.2f s, %d ranks x %d "
                    "threads\n",
                    input.c_str(), output.c_str(), (long long)r.tiles, (long long)r.tiles_skipped, spread.c_str(),
                    tile.summary().c_str(), r.seconds, world.size(), threads);
        if (!f.overlay.empty()) {
          write_overlay_png(input, output, f.overlay);
          std::printf("overlay: %s\n", f.overlay.c_str());
        }
        if (!f.vectorize.empty()) vectorize(f, output, vector_options);
      }
      continue;
    }
    const InferenceReport r = infer_to_files(f, net, *image, norm, output, options, root, loaded.meta.class_names);
    if (!root) continue;
    std::string spatial;
    if (mesh) spatial = ", spatial " + std::to_string(f.sp) + " (mesh " + mesh->describe() + ") on " +
                        std::to_string(world.size()) + " ranks x";
    std::printf("%s -> %s: %lld tiles, %s, %.2f s, %.3f Mpx/s, %.2f useful GFLOP/s, tiling overhead %.2fx%s %d "
                "threads\n",
                input.c_str(), output.c_str(), (long long)r.tiles, tile.summary().c_str(), r.seconds,
                r.pixels / 1e6 / r.seconds, r.useful_gflops / r.seconds, r.overhead,
                spatial.empty() ? "," : spatial.c_str(), threads);
    if (!f.overlay.empty()) {
      write_overlay_png(input, output, f.overlay);
      std::printf("overlay: %s\n", f.overlay.c_str());
    }
    if (!f.probabilities.empty()) std::printf("probabilities: %s\n", f.probabilities.c_str());
    if (!f.vectorize.empty()) vectorize(f, output, vector_options);
  }
}

}  // namespace

void register_infer(CLI::App& app) {
  auto* cmd = app.add_subcommand("infer", "Tiled inference: image (or folder) -> label raster / label volume");
  static Flags f;
  cmd->add_option("--checkpoint", f.checkpoint, "Checkpoint written by `tessera train`");
  cmd->add_option("--init", f.init, "'random': an untrained network (for benchmarks), with --model and --seed");
  f.model.add_to(cmd);
  cmd->add_option("--seed", f.seed, "Seed for --init random");
  cmd->add_option("--input", f.input, "GeoTIFF / NIfTI / NRRD / MHA / DICOM folder, or a folder of images")->required();
  cmd->add_option("--output", f.output, "Label GeoTIFF (.tif) or label volume (.nii.gz ...), or a folder")->required();
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
  cmd->add_option("--sp", f.sp,
                  "Spatial parallelism: every tile split into N blocks, one per rank (mpirun -np N; world size "
                  "must be N), halos exchanged, rank 0 writes the labels of one process with the same tile. "
                  "For a tile or a whole volume larger than one rank's memory; `same`-padding models only")
      ->capture_default_str();
  cmd->add_option("--sp-mesh", f.sp_mesh,
                  "With --sp: blocks per spatial axis, e.g. 2x2 (product = --sp; default: --sp blocks along the "
                  "first axis, rows or slices)");
  cmd->add_option("--threads", f.threads, "Intra-op threads (default: cores / ranks on this node)");
  cmd->add_flag("--no-progress", f.no_progress, "No progress line");
  cmd->callback([] { run(f); });
}

}  // namespace tessera::cli
