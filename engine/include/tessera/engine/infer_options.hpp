#pragma once
// What `tessera infer` is asked, declared once: fields() drives the command's flags (each
// key is its flag, `min_area` → --min-area; a bool that defaults to true is turned off by
// --no-<key>), their help and shown defaults, and validate(), whose messages name the flags.
// The model of `--init random` is a UNetOptions (its own declaration: --model PRESET plus
// --levels, --base-filters, …), resolved by the caller. Torch-free.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/unet_spec.hpp"

namespace tessera::engine {

struct InferOptions {
  // what runs
  std::string checkpoint;  ///< written by `tessera train`; or init "random" with `model`
  std::string init;        ///< "random": an untrained network of `model` (benchmarks)
  uint64_t seed = 0;       ///< init random's weights
  UNetOptions model = unet_preset("unet-tiny");  ///< init random's network (not a flag of its own: --model …)
  std::string model_preset = "unet-tiny";        ///< its preset name, for the STAC item
  // what it reads
  std::string input;   ///< an image, a folder of images, an MSD folder or a DICOM series
  std::string series;  ///< DICOM: the series to read from a folder of several
  std::vector<int> bands;  ///< the model's channels from these input bands, 1-based; empty = as they are
  // how
  std::string mode = "auto";  ///< tile, stream (strips through the network, nothing recomputed), or auto
  std::string window = "auto";  ///< gaussian (training-size windows, blended), exact (tiles / stream), or auto
  std::string tta = "none";     ///< none, or mirror: sliding windows averaged over flipped copies
  std::string tile = "auto";  ///< inset side, or auto: the largest that fits memory_budget
  std::string memory_budget;  ///< with tile auto; "" = half of MemAvailable per node, shared by its ranks
  int batch = 1;
  int threads = 0;            ///< intra-op threads; 0 = cores / ranks on this node
  bool progress = true;
  bool postprocessing = true;  ///< apply the checkpoint's run's RUN/postprocessing.json to volumes
  std::string precision = "fp32";  ///< fp32, or bf16: weights and activations in bfloat16, logits in fp32
  std::string profile;             ///< Chrome trace of rank 0's operators; "" = none
  std::string run_dir;             ///< tiles kept in RUN/tiles/ and spread over the ranks
  int sp = 1;                      ///< spatial parallelism: every tile split over this many ranks
  std::string sp_mesh;             ///< blocks per axis with sp, e.g. 2x2
  // what it writes
  std::string output;         ///< labels (raster, volume, DICOM SEG) or a folder
  std::string store;          ///< a DICOMweb service the SEG is sent to (STOW-RS) once committed
  std::string overlay;        ///< PNG of the image with the labels blended
  std::string probabilities;  ///< float32 GeoTIFF, a band per class
  std::string vectorize;      ///< polygons (.gpkg, .geojson, .shp)
  double min_area = 0;        ///< with vectorize: polygons smaller are dropped (map units²)
  double simplify = 0;        ///< with vectorize: edge tolerance in map units
  bool vector_background = false;  ///< with vectorize: class 0 polygons too
  bool cog = false;                ///< Cloud-Optimized GeoTIFFs (also chosen by a .cog.tif name)
  std::string t_srs;               ///< warp the labels to this CRS
  double tr = 0;                   ///< with t_srs: target pixel size; 0 = GDAL's choice
  std::string mosaic;              ///< with a folder of scenes: one mosaic (.vrt or .tif)
  bool stac_relative = false;      ///< STAC items and collection self-contained: relative paths, no self link

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

/// The flag that asks for exact tiles or a stream ("--mode tile", "--tile 64", "--sp 2",
/// "--run-dir R"), which --window auto then keeps to; "" when none does.
std::string exact_only_flags(const InferOptions& o);

/// The flags of the outputs beside the labels (overlay, polygons, probabilities, COG, warp,
/// mosaic, STAC): part of fields(), in its order.
template <class V>
void output_fields(InferOptions& o, V& v) {
  v.field("overlay", o.overlay, "Also write a PNG of the image with the labels blended on top");
  v.field("vectorize", o.vectorize,
          "Also polygonize the whole label raster (no cuts at tile seams; 4-connected regions) to .gpkg / .geojson / "
          ".shp with fields class_id, class_name, area (map units^2); 2-D only");
  v.field("min_area", o.min_area, "With --vectorize: drop polygons smaller than A map units^2");
  v.field("simplify", o.simplify,
          "With --vectorize: simplify edges, tolerance in map units, topology preserved (0: exact pixel edges)");
  v.field("vector_background", o.vector_background, "With --vectorize: also write class 0 polygons");
  v.field("probabilities", o.probabilities,
          "Also write per-class softmax probabilities: Float32 GeoTIFF, band k+1 = class k, NaN where the input has no "
          "data; 2-D; one process, or rank 0 with --sp (not with --run-dir)");
  v.field("cog", o.cog,
          "Write the labels (and --probabilities) as Cloud-Optimized GeoTIFFs with internal overviews (mode for labels, "
          "average for probabilities); also chosen by a .cog.tif output name");
  v.field("t_srs", o.t_srs,
          "Write the labels in this CRS (e.g. EPSG:3857, any CRS GDAL knows): inference runs on the input's grid, the "
          "labels are warped with nearest neighbour (class ids are never mixed)");
  v.field("tr", o.tr, "With --t-srs: target pixel size in the target CRS's units (0: GDAL's choice)");
  v.field("mosaic", o.mosaic,
          "With a folder of scenes: one mosaic of every scene's labels, .vrt (references the scenes' label rasters) or "
          ".tif; scenes in different CRSs need --t-srs");
  v.field("stac_relative", o.stac_relative,
          "Self-contained STAC items (and a folder's collection.json): every local href, tessera:source and "
          "tessera:checkpoint relative to the item's folder, even outside the output's top-level folder, and no absolute "
          "\"self\" link, so the output folder can be moved or published as it is (default: absolute paths where the "
          "files share no top-level folder, and an absolute self link)");
}

template <class V>
void fields(InferOptions& o, V& v) {
  v.field("checkpoint", o.checkpoint, "Checkpoint written by `tessera train`");
  v.field("init", o.init, "'random': an untrained network (for benchmarks), with --model and --seed");
  v.field("seed", o.seed, "Seed for --init random");
  v.field("input", o.input,
          "GeoTIFF / NIfTI / NRRD / MHA / DICOM folder, a folder of images, or a series on a PACS: "
          "dicomweb://HOST[:PORT]/PATH/studies/UID/series/UID (dicomwebs:// for HTTPS; retrieved with QIDO-RS and "
          "WADO-RS; credentials from TESSERA_DICOMWEB_TOKEN or TESSERA_DICOMWEB_USER + TESSERA_DICOMWEB_PASSWORD)");
  v.field("output", o.output,
          "Label GeoTIFF (.tif; .cog.tif: Cloud-Optimized) or label volume (.nii.gz ...), or a folder. A GeoTIFF "
          "carries the class names (GDAL categories and an attribute table Value, Class_Name, Red, Green, Blue, Count "
          "in <output>.aux.xml), the colour table and nodata 255, and gets a QGIS style <output minus .tif>.qml beside it");
  v.field("mode", o.mode,
          "tile: tiles with halos (recomputed); stream: strips of rows (slices) through the network, each feature "
          "computed once, carried rows kept per level, the same labels (valid built-in U-Nets without group or instance "
          "norm; one process or whole scenes per rank); auto: stream where the model allows it and tiles would "
          "recompute, else tiles; the summary line says which and why");
  v.field("window", o.window,
          "gaussian: windows of the training patch (the checkpoint records it), overlapping by half, blended with "
          "Gaussian weights (sigma = side/8; nnU-Net, MONAI), as instance/group norm and SE blocks saw them in training; "
          "exact: tiles with halos or a stream (--mode), one pass over the whole image; auto: gaussian for models whose "
          "output depends on the window (instance/group norm, registry models such as se-unet) when the checkpoint "
          "records its patch and no --mode, --tile N, --sp or --run-dir asks for tiles; the summary line says why");
  v.field("tta", o.tta, "With sliding windows: none, or mirror (logits averaged over flips of every axis subset)");
  v.field("postprocessing", o.postprocessing,
          "Apply the post-processing `tessera postprocess` decided for the checkpoint's run (RUN/postprocessing.json: "
          "keep the largest component of the classes where it raised validation Dice) to volumes "
          "(--no-postprocessing: labels as the network gives them)");
  v.field("store", o.store,
          "Send the DICOM SEG (--output NAME.dcm) to a PACS with STOW-RS once the run's outputs have committed: "
          "dicomweb://HOST[:PORT]/PATH (the service root, or .../studies/UID); credentials as for --input");
  v.field("tile", o.tile,
          "Inset side S kept per tile (multiple of 2^(L-1)), or 'auto': the largest S whose predicted memory (the "
          "planner's inference model) fits --memory-budget. Never larger than the image (clamped per axis to it, "
          "rounded up to 2^(L-1)); never changes the answer");
  v.field("memory_budget", o.memory_budget,
          "With --tile auto: peak memory the process may use, e.g. 2GiB, 512MiB or a number of MiB (default: half the "
          "free RAM, MemAvailable, split among the ranks of a node; inference runs on the CPU)");
  v.field("batch", o.batch, "Tiles per forward pass");
  v.field("series", o.series,
          "DICOM: the SeriesInstanceUID to read from a folder holding several series (list them: tessera info FOLDER)");
  v.field("bands", o.bands,
          "The model's input channels from the input's bands, 1-based, in the order the training images had them: "
          "--bands 1,2,3,3 runs a 3-band scene through a 4-band model (band 3 twice); default: the bands as they are");
  v.field("run_dir", o.run_dir, "Keep finished tiles in RUN/tiles/ (resumable) and spread them over MPI ranks");
  output_fields(o, v);
  v.field("sp", o.sp,
          "Spatial parallelism: every tile split into N blocks, one per rank (mpirun -np N; world size must be N), halos "
          "exchanged, rank 0 writes the labels of one process with the same tile. For a tile or a whole volume larger "
          "than one rank's memory; `same`-padding models only");
  v.field("sp_mesh", o.sp_mesh,
          "With --sp: blocks per spatial axis, e.g. 2x2 (product = --sp; default: --sp blocks along the first axis, rows "
          "or slices)");
  v.field("precision", o.precision,
          "fp32, or bf16: the network in bfloat16 (AVX-512 BF16 / AMX on CPUs that have them, tensor cores on GPUs), its "
          "logits compared in fp32; labels agree with fp32 up to near-ties");
  v.field("threads", o.threads, "Intra-op threads (0: cores / ranks on this node)");
  v.field("progress", o.progress, "A progress line (--no-progress: none)");
  v.field("profile", o.profile,
          "Write rank 0's operators as a Chrome trace JSON; scripts/profile_summary.py FILE prints where the time went");
}

}  // namespace tessera::engine
