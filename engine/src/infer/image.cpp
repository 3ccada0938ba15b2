// One image of an InferJob: opened (a volume resampled to the model's spacing), checked
// against every output it is asked for, labelled through the group's ranks — tiles in one
// process, tiles spread with a run directory, or every tile split with --sp — and its
// outputs made and committed together on the group's rank 0.
#include <algorithm>
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <torch/torch.h>

#include "infer_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/preprocessing.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/parallel/comm/model_sync.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/parallel/modes/device_monitor.hpp"
#include "tessera/parallel/modes/sample_parallel.hpp"
#include "tessera/parallel/modes/spatial.hpp"
#include "tessera/run/process_memory.hpp"

namespace tessera::engine::infer {
namespace {

// The input as opened and, for a volume trained at another spacing, resampled to it: what
// the network reads. Its labels go back onto the input's own grid (write_labels).
struct OpenedImage {
  std::unique_ptr<ImageSource> opened, resampled;
  const ImageSource& network_input() const { return resampled ? *resampled : *opened; }
};

OpenedImage open_for_network(const InferOptions& o, const Model& model, const std::string& input, bool root) {
  OpenedImage im;
  im.opened = io::open_image(input, io::ImageOpenOptions().with_series_uid(o.series));
  const std::string modality = volume_modality(*im.opened);
  im.opened = select_bands(std::move(im.opened), o.bands);
  check_input(o, model, *im.opened, modality, root);
  if (model.loaded.net) im.resampled = to_network_grid(*im.opened, model.loaded.meta.resampling, /*is_labels=*/false);
  if (!im.resampled) return im;
  if (!o.run_dir.empty())
    throw Error("--run-dir " + o.run_dir + ": " + input + " is resampled to the model's spacing (" +
                describe(model.loaded.meta.resampling) + "); its tiles cannot be kept on the input's grid, run without "
                "--run-dir");
  if (root)
    std::fprintf(stderr,
                 "infer: %s resampled to %s, %s voxels (class probabilities back onto its own %s, linear; argmax "
                 "there)\n",
                 input.c_str(),
                 describe(model.loaded.meta.resampling).c_str(), to_string(im.resampled->info().extent).c_str(),
                 to_string(im.opened->info().extent).c_str());
  return im;
}

// The checks of the labels' own outputs (2-D only) and of every other output, before any
// inference; the outputs' files staged.
void check_outputs(const InferOptions& o, const InferredImage& image, const Index& extent,
                   const std::vector<std::unique_ptr<ImageOutput>>& outputs, OutputSet& set, bool root) {
  if (!o.probabilities.empty() && extent.size() != 2)
    throw Error("--probabilities needs a 2-D raster; " + image.input + " is a volume");
  if (o.cog && extent.size() != 2) throw Error("--cog needs a 2-D raster; " + image.input + " is a volume");
  for (const auto& output : outputs) output->check(image, root ? &set : nullptr);  // other ranks write nothing
}

// The tile for this image, and under --sp why it is one rank's choice.
TileChoice choose_image_tile(const InferOptions& o, const UNetOptions& model, const Index& extent, bool spatial,
                             parallel::Communicator& group) {
  const TileChoiceOptions tile_options = tile_choice_options(o, group);
  TileChoice tile = resolve_tile(tile_options, model, extent, o.batch, group);
  // The memory model predicts one process running the whole tile; a rank of --sp holds a
  // block of the activations but the whole tile's input and logits, which it does not model.
  const int64_t whole = *std::max_element(extent.begin(), extent.end()) + unet_alignment(model);
  if (spatial && tile_options.tile == 0 && tile.steps != clamped_steps(extent, whole, unet_alignment(model)))
    tile.reason += "; one rank's choice: --sp does not enlarge it, give --tile";
  return tile;
}

// --precision bf16: the weights in bfloat16 (idempotent: every image of a folder shares the
// loaded model); inputs are cast per batch, logits come back in fp32.
void use_precision(const InferOptions& o, UNet& net, const std::string& input, const Index& extent, bool spatial,
                   InferenceOptions& options) {
  if (o.precision != "bf16") return;
  if (spatial) throw Error("--precision bf16: not with --sp (its halo exchange is fp32)");
  if (extent.size() == 3 && !torch::cuda::is_available())
    throw Error("--precision bf16: " + input + " is a volume, and this LibTorch has no bfloat16 3-D max pooling on "
                "the CPU; use fp32");
  net->to(torch::kBFloat16);
  options.with_forward([](UNet& n, const torch::Tensor& x) { return n->forward(x.to(torch::kBFloat16)).to(torch::kFloat); });
}

// The tiles, or the streamed bands, spread over the group's ranks and kept in RUN/tiles/;
// rank 0 assembles them.
void label_sample_parallel(const InferOptions& o, UNet& net, const ImageSource& image, const Normalization& norm,
                           const InferredImage& inferred, const std::string& labels, bool warp, const ImageRun& run,
                           const std::string& tile, const InferenceOptions& options, parallel::Communicator& group,
                           int threads) {
  const bool root = group.rank() == 0;
  parallel::SampleParallelOptions sp;
  sp.run_dir = o.run_dir;
  sp.inference = options;
  sp.assemble_into = labels;
  parallel::DeviceMonitorOptions mo;
  mo.run_dir = o.run_dir;
  mo.rank = parallel::world().rank();
  parallel::DeviceMonitor monitor(mo);
  monitor.set_phase("infer");
  const std::string name = warp ? inferred.output + ".partial-source-grid.tif" : inferred.output;
  const auto r = parallel::infer_sample_parallel(net, image, norm, name, group, sp,
                                                 [&](int64_t done) { monitor.set_tiles_done(done); });
  // The tiles' mosaic lists the ids it holds as "class <id>"; the model's names, every class
  // and --cog need one more pass over it.
  if (root && image.info().extent.size() == 2 && !warp) io::restyle_label_raster(labels, inferred.style);
  monitor.set_phase("done");
  torch::Tensor per_rank = group.allgather(torch::tensor({r.tiles_here}));
  torch::Tensor recompute = torch::tensor({r.recompute}, torch::kDouble);
  group.allreduce(recompute, parallel::ReduceOp::kSum);
  if (!root) return;
  std::string spread;
  for (int k = 0; k < group.size(); ++k) spread += (k ? " " : "") + std::to_string(per_rank[k].item<int64_t>());
  const std::string how = run.strip ? run.why + ", " + run.strip->summary() : tile + (run.why.empty() ? "" : ", " + run.why);
  // What this run computed ran its share of the whole image's FLOPs: nothing when all was kept.
  const std::string work = r.tiles_skipped < r.tiles ? fmt::format(", recompute {:.2f}x", recompute.item<double>()) : "";
  std::printf("%s -> %s: %lld %s (%lld kept from an earlier run; per rank: %s), %s, %.2f s%s, %d ranks x %d threads\n",
              inferred.input.c_str(), inferred.output.c_str(), (long long)r.tiles, run.strip ? "bands" : "tiles",
              (long long)r.tiles_skipped, spread.c_str(), how.c_str(), r.seconds, work.c_str(), group.size(), threads);
}

// The process's peak resident memory so far beside the memory model's prediction for the run
// (tile_choice.hpp: baseline + inference_bytes or stream_footprint); "" when nothing was predicted.
std::string memory_against_model(int64_t predicted) {
  if (predicted <= 0) return "";
  const double peak = double(peak_resident_bytes()), mib = double(1 << 20);
  return fmt::format(", peak RSS {:.0f} MiB, predicted {:.0f} MiB ({:+.1f} %)", peak / mib, double(predicted) / mib,
                     100.0 * (double(predicted) - peak) / peak);
}

void print_summary(const InferredImage& image, const InferenceReport& r, const TileChoice& tile, const ImageRun& run,
                   const std::string& spatial, const std::string& probabilities, int threads) {
  const std::string rate = fmt::format("{:.2f} s, {:.3f} Mpx/s, {:.2f} useful GFLOP/s", r.seconds, r.pixels / 1e6 / r.seconds,
                                       r.useful_gflops / r.seconds) +
                           memory_against_model(run.sliding ? 0
                                                : run.strip ? run.strip->predicted_bytes
                                                            : tile.predicted_bytes);
  const std::string window = run.window_why.empty() ? "" : run.window_why + ", ";
  if (run.sliding)
    std::printf("%s -> %s: %lld windows, %s, %s, read %.2fx, %d threads\n", image.input.c_str(), image.output.c_str(),
                (long long)r.tiles, run.window_why.c_str(), rate.c_str(), r.overhead, threads);
  else if (run.strip)
    std::printf("%s -> %s: %lld strips, %s, %s, %s, recompute %.2fx, carried %s, %s%d threads\n", image.input.c_str(),
                image.output.c_str(), (long long)r.tiles, run.why.c_str(), run.strip->summary().c_str(), rate.c_str(),
                r.recompute, format_bytes(r.held_bytes).c_str(), window.c_str(), threads);
  else
    std::printf("%s -> %s: %lld tiles, %s, %s, tiling overhead %.2fx, recompute %.2fx%s%s %s%d threads\n",
                image.input.c_str(), image.output.c_str(), (long long)r.tiles, tile.summary().c_str(), rate.c_str(),
                r.overhead, r.recompute, run.why.empty() ? "" : (", " + run.why).c_str(),
                spatial.empty() ? "," : spatial.c_str(), window.c_str(), threads);
  if (!probabilities.empty()) std::printf("probabilities: %s\n", probabilities.c_str());
}

}  // namespace

void infer_image(const InferOptions& o, const Model& model, const SceneJob& job, parallel::Communicator& group,
                 int threads, bool in_folder) {
  const bool root = group.rank() == 0;
  const OpenedImage opened = open_for_network(o, model, job.input, root);
  const ImageSource& image = opened.network_input();
  const Index& extent = image.info().extent;
  Network network = network_for(o, model, image);
  UNet& net = network.net;
  InferredImage inferred{job.input, job.output, opened.opened.get(),
                         model.label_style(o.cog).with_classes(static_cast<int>(net->options().classes)), in_folder};
  // Every output of this image is staged and committed together at the end (or not at all).
  OutputSet outputs;
  const std::vector<std::unique_ptr<ImageOutput>> made_from_labels = image_outputs(o, model);
  check_outputs(o, inferred, extent, made_from_labels, outputs, root);
  auto staged = [&](const std::string& path) { return path.empty() || !root ? path : outputs.stage(path); };
  // With --t-srs the network labels the input's grid (a temporary) and the labels are warped.
  const bool warp = !o.t_srs.empty();
  WrittenLabels written;
  written.labels = staged(job.output);
  written.source_grid = warp ? written.labels + ".partial-source-grid.tif" : written.labels;
  std::optional<SpatialMesh> mesh;
  if (o.sp > 1) mesh = spatial_mesh(o, static_cast<int>(extent.size()));
  const TileChoice tile = choose_image_tile(o, net->options(), extent, mesh.has_value(), group);
  const bool show_progress = o.progress && (root || !mesh) && !(in_folder && parallel::world().size() > 1);
  const ImageRun run = choose_image_run(o, net->options(), model.loaded.meta.training_window, extent, tile, group);
  auto options = InferenceOptions().with_tile(tile.tile).with_batch(o.batch).with_progress(show_progress);
  if (run.strip) options.with_strip(run.strip->strip).with_columns(run.strip->columns).with_groups(run.strip->groups).with_band(run.band);
  if (run.sliding) options.with_sliding(*run.sliding);
  use_precision(o, net, job.input, extent, mesh.has_value(), options);
  std::optional<parallel::SpatialDecomposition> decomposition;  // --sp: this rank's block of every tile
  if (mesh) {
    check_spatial_model(o, net->options(), *mesh, tile.tile, extent);
    // Rank 0's weights on every rank: a checkpoint or the same seed give them already; this
    // makes it a guarantee rather than an assumption about the random generator.
    parallel::broadcast_module(*net, {&group});
    decomposition.emplace(group, *mesh);
    options.with_forward(spatial_forward(*decomposition));
  }
  if (!o.run_dir.empty()) {
    label_sample_parallel(o, net, image, network.norm, inferred, written.source_grid, warp, run, tile.summary(), options,
                          group, threads);
  } else {
    const InferenceReport r =
        write_labels(o, net, image, *opened.opened, network.norm, written.source_grid, staged(o.probabilities), options,
                     root, model.class_names(), warp ? io::LabelStyle::bare() : inferred.style, model.keep_largest);
    if (!root) return;
    const std::string spatial = mesh ? ", spatial " + std::to_string(o.sp) + " (mesh " + mesh->describe() + ") on " +
                                           std::to_string(group.size()) + " ranks x"
                                     : "";
    print_summary(inferred, r, tile, run, spatial, o.probabilities, threads);
    if (extent.size() == 3 && !model.postprocessing.empty())
      std::printf("%s: %s\n", job.input.c_str(), model.postprocessing.c_str());
  }
  if (!root) return;
  for (const auto& output : made_from_labels) output->write(inferred, written, outputs);
  outputs.commit();
  std::fflush(stdout);
}

}  // namespace tessera::engine::infer
