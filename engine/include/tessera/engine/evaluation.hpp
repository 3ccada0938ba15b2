#pragma once
// `tessera eval` as a library: per-class Dice, IoU, precision and recall of a label map
// against the truth over the whole image or the held-back area, streamed in slabs so any size
// fits; optionally HD95 in physical units over the same area (which then has to fit in
// memory, one byte per pixel twice). Labels are 0..254; 255, NaN and anything else out of
// range is "no label". EvalOptions is what `tessera eval` is asked, declared once: fields()
// drives the command's flags (`holdout_fraction` → --holdout-fraction), their help and
// validate(), whose messages name the flags. Torch-free.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/metrics.hpp"
#include "tessera/core/tile_grid.hpp"
#include "tessera/engine/regions.hpp"
#include "tessera/io/hausdorff.hpp"

namespace tessera::engine {

struct EvalOptions {
  std::string pred, truth;         ///< required: label rasters or volumes of the same size
  int classes = 0;                 ///< 0: the largest label seen + 1
  Holdout holdout;                 ///< fraction 0: the whole image
  bool hd95 = false;
  std::vector<std::string> names;  ///< class names, in order; empty = the checkpoint's, else the label files'
  std::string checkpoint;          ///< names from this checkpoint (the model that made `pred`)
  bool json = false;               ///< run_eval prints JSON instead of the table

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(EvalOptions& o, V& v) {
  v.field("pred", o.pred, "Predicted labels (raster or volume)");
  v.field("truth", o.truth, "True labels, same size");
  v.field("classes", o.classes, "Number of classes (0, the default: largest label seen + 1)");
  v.field("names", o.names,
          "Class names, in order (default: the --checkpoint's, else the ones the label files carry: a raster's "
          "categories, a volume's ITK-SNAP / Slicer side files; else numbers)");
  v.field("checkpoint", o.checkpoint, "Take the class names from this checkpoint (the model that made --pred)");
  v.field("holdout_fraction", o.holdout.fraction,
          "Evaluate only the last fraction of one axis (the area `train` held back)");
  v.field("holdout_axis", o.holdout.axis, "x, y or z (default x for rasters, z for volumes)");
  v.field("hd95", o.hd95,
          "Also the 95th-percentile symmetric surface Hausdorff distance per class (MONAI's convention), in physical "
          "units: GeoTIFF pixel size in CRS units, volume spacing in mm. Computed over the evaluated area only (the "
          "held-back part with --holdout-fraction), which is then held in memory: 2 bytes per pixel plus distance maps "
          "of each class's bounding box");
  v.field("json", o.json, "Print JSON");
}

struct ClassEvaluation {
  int label = 0;
  std::string name;
  ClassScores scores;
  double hd95 = 0;  ///< NaN without --hd95 or where absent from both, inf where absent from one
};

struct Evaluation {
  EvalOptions options;
  Box region;
  io::GridSpacing spacing;  ///< the truth's (HD95's units)
  std::vector<ClassEvaluation> classes;
  double mean_dice = 0;  ///< over the classes present in the truth (0 when none is)
  double mean_iou = 0;   ///< the same; NaN when none
  double mean_hd95 = 0;  ///< the same; NaN without --hd95

  /// What `tessera eval --json` prints (NaN and infinity as null).
  nlohmann::json to_json() const;
};

/// Throws tessera::Error naming the file or the option.
Evaluation evaluate(const EvalOptions& options);

/// The per-class table `tessera eval` prints ('-' where undefined, inf where infinite).
void print_evaluation(const Evaluation& e);

/// The command: evaluate(), printed as the table or, with `json`, as to_json().
void run_eval(const EvalOptions& options);

}  // namespace tessera::engine
