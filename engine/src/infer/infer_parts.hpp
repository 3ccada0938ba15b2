#pragma once
// The steps of an InferJob (engine/include/tessera/engine/infer_job.hpp), one idea per file:
//   inputs.cpp        which images, where their labels go; the folder-wide checks
//   input_checks.cpp  --bands, and the input against what the model was trained on
//   model.cpp         the network (checkpoint or random), what made it (for STAC)
//   tile.cpp          each image's tile from the memory model and budget
//   spatial.cpp       --sp: its checks and forward runner
//   labels.cpp        the tile sinks: labels (raster, volume, DICOM SEG, resampled back) and probabilities
//   outputs.cpp       the outputs made from finished labels: overlay, reprojection, polygons, STAC
//   folder.cpp        after a folder: the STAC collection and the mosaic
//   image.cpp         one image, from opening it to committing its outputs
//   infer_job.cpp     the run
// Internal to engine/.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/spatial_mesh.hpp"
#include "tessera/core/tile_choice.hpp"
#include "tessera/engine/infer_options.hpp"
#include "tessera/engine/scene_batch.hpp"
#include "tessera/io/label_style.hpp"
#include "tessera/run/output_set.hpp"

namespace tessera::parallel {
class Communicator;
class SpatialDecomposition;
}  // namespace tessera::parallel

namespace tessera::engine::infer {

// ---- inputs.cpp --------------------------------------------------------------------------

/// The images of a run. `folder`: a folder of scenes or an MSD dataset (outputs in a folder).
struct PlannedInputs {
  std::vector<SceneJob> jobs;
  bool folder = false;
};
/// A dataset folder (dataset.json: MSD / nnU-Net) is its test images, written as
/// <case><ending>; a folder holding image files is a batch of scenes; any other folder is a
/// DICOM series. Creates the output folder of a batch.
PlannedInputs plan_inputs(const InferOptions& o);
/// A folder's scenes opened for their sizes (the order whole scenes are handed out in).
void size_scenes(PlannedInputs& inputs);
/// The folder-wide checks before any inference: --mosaic needs one CRS (or --t-srs), and
/// the outputs that work on one image only.
void check_inputs(const InferOptions& o, const PlannedInputs& inputs);

// ---- model.cpp ---------------------------------------------------------------------------

/// The checkpoint (or nothing, for --init random) and what made the labels.
struct Model {
  LoadedCheckpoint loaded;
  SceneMaker maker;
  std::vector<int> keep_largest;  ///< classes whose largest component is kept (volumes; RUN/postprocessing.json)
  std::string postprocessing;     ///< what the summary line says of it ("" when none is applied)
  int classes() const;  ///< of the checkpoint's network, or of init random's model
  const std::vector<std::string>& class_names() const { return loaded.meta.class_names; }
  /// How its labels present their classes: names, colours, background, classes; --cog.
  io::LabelStyle label_style(bool cog) const;
};
Model load_model(const InferOptions& o);
/// The network that runs `image`: the checkpoint's, or init random's (seeded, with the
/// image's channels and dimensions), and its normalisation of `image`.
struct Network {
  UNet net;
  Normalization norm;
};
Network network_for(const InferOptions& o, const Model& model, const ImageSource& image);

// ---- input_checks.cpp --------------------------------------------------------------------

/// `image` reduced to --bands, in that order (1-based); `image` itself without --bands.
/// Throws tessera::Error naming --bands when a band is not the image's.
std::unique_ptr<ImageSource> select_bands(std::unique_ptr<ImageSource> image, const std::vector<int>& bands);
/// `image` (after --bands) against the checkpoint, before any inference: another channel count
/// is an error that says how to map bands (--bands 1,2,3,3); with `report`, another modality,
/// an intensity range far from the training images' (a CT model on an MR volume) and a pixel
/// size far from the training one are warnings on stderr naming the check and what to do.
/// `modality`: the input's ("CT", "MR"; "" unknown). Nothing is checked for --init random.
void check_input(const InferOptions& o, const Model& model, const ImageSource& image, const std::string& modality,
                 bool report);

// ---- tile.cpp ----------------------------------------------------------------------------

/// --tile and --memory-budget, checked before any inference; the default budget is a share
/// of the memory this node has free, split among its ranks.
TileChoiceOptions tile_choice_options(const InferOptions& o, parallel::Communicator& world);
/// The tile for one image (the memory model on top of what this process holds already), the
/// same on every rank: the smallest any rank chose.
TileChoice resolve_tile(const TileChoiceOptions& o, const UNetOptions& model, const Index& extent, int batch,
                        parallel::Communicator& world);

/// How one image runs (--mode): tiles, or strips streamed through the network; and why.
struct ImageRun {
  std::optional<SlidingWindowOptions> sliding;  ///< set: Gaussian-blended windows of the training size
  std::optional<StripChoice> strip;  ///< set: streamed, in strips of strip->strip rows
  int64_t band = 0;                  ///< streamed under --run-dir: rows per rank's band (band_rows); 0: one band
  double tile_recompute = 1;         ///< FLOPs the chosen tiles would run / one pass over the image
  std::string why;                   ///< "stream (auto: …)" or, when auto chose tiles, "tiles (auto: …)"
  std::string window_why;            ///< --window's choice and why ("gaussian windows 32×32 (auto: …)")
};
/// --window first (sliding_window.hpp's choose_window, with the checkpoint's `training_window`):
/// gaussian windows, or else --mode tile: tiles; stream: strips (a model that does not stream
/// is refused, naming why);
/// auto: strips where the model streams, no --sp or --tile N is given and choose_mode
/// (tile_choice.hpp) picks the stream: predicted faster than `tile` (its recompute against
/// the strips' operator efficiency), or the whole image as one tile would hold more than
/// twice the stream's predicted memory; else tiles. Under --run-dir the group's ranks take bands of rows
/// (band_rows) and stream each.
ImageRun choose_image_run(const InferOptions& o, const UNetOptions& model, const Index& training_window,
                          const Index& extent, const TileChoice& tile, parallel::Communicator& group);

// ---- spatial.cpp -------------------------------------------------------------------------

/// What --sp refuses before any image is read; `whole_scenes`: the ranks take whole scenes.
void check_spatial_flags(const InferOptions& o, const parallel::Communicator& world, bool whole_scenes);
/// The blocks of every tile: --sp-mesh, or --sp blocks along the first axis.
SpatialMesh spatial_mesh(const InferOptions& o, int dims);
/// `same` padding, a built-in U-Net, a tile window that splits on the pooling grid.
void check_spatial_model(const InferOptions& o, const UNetOptions& model, const SpatialMesh& mesh, int64_t tile,
                         const Index& extent);
/// This rank's block of every window through the network, then the whole windows' logits.
ForwardRunner spatial_forward(const parallel::SpatialDecomposition& decomposition);

// ---- labels.cpp --------------------------------------------------------------------------

/// The labels (and --probabilities) of one image through the tiled loop; `writes`: this rank
/// writes (one process, or rank 0 under --sp), else it only computes. `image` is what the
/// network reads: `original`, or `original` resampled to the model's spacing, in which case
/// the class probabilities go back onto original's grid (linear, io::ResamplingProbabilitySink)
/// and are argmaxed there. Volumes keep the largest component of each class of `keep_largest`.
/// Paths are the staged ones.
InferenceReport write_labels(const InferOptions& o, UNet& net, const ImageSource& image, const ImageSource& original,
                             const Normalization& norm, const std::string& labels, const std::string& probabilities,
                             const InferenceOptions& options, bool writes, const std::vector<std::string>& class_names,
                             const io::LabelStyle& style, const std::vector<int>& keep_largest);

// ---- outputs.cpp -------------------------------------------------------------------------

/// An inferred image as the outputs made from its labels see it.
struct InferredImage {
  std::string input;                 ///< as given
  std::string output;                ///< the labels' final path
  const ImageSource* source = nullptr;  ///< the input as opened
  io::LabelStyle style;              ///< class names, colours, COG
  bool in_folder = false;
};

/// Where the labels are now (staged): `source_grid` on the input's grid, `labels` the output
/// (source_grid, or its warp with --t-srs).
struct WrittenLabels {
  std::string source_grid;
  std::string labels;
};

/// One output made from an image's finished labels. check() runs before any inference: it
/// refuses what the image cannot give (naming the flag) and, on the rank that writes, stages
/// its file in the image's OutputSet (a folder that cannot be made fails there); write()
/// makes the output, staged.
class ImageOutput {
 public:
  virtual ~ImageOutput() = default;
  virtual void check(const InferredImage& image, OutputSet* outputs) const = 0;
  virtual void write(const InferredImage& image, WrittenLabels& labels, OutputSet& outputs) = 0;
};

/// The outputs `o` asks for, in the order they are made: overlay (from the input-grid
/// labels), reprojection, polygons, and last the STAC item naming them.
std::vector<std::unique_ptr<ImageOutput>> image_outputs(const InferOptions& o, const Model& model);

// ---- folder.cpp --------------------------------------------------------------------------

/// After a folder of scenes (rank 0): the STAC collection of the finished ones and --mosaic.
void finish_folder(const InferOptions& o, const std::vector<SceneJob>& jobs, const Model& model, int64_t failed);

// ---- image.cpp ---------------------------------------------------------------------------

/// One image through this group's ranks (the whole world, or one rank for a whole scene),
/// then, on the group's rank 0, its outputs, committed together.
void infer_image(const InferOptions& o, const Model& model, const SceneJob& job, parallel::Communicator& group,
                 int threads, bool in_folder);

}  // namespace tessera::engine::infer
