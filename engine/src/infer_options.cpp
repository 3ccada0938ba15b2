#include "tessera/engine/infer_options.hpp"

#include <cmath>
#include <filesystem>

#include "tessera/core/error.hpp"
#include "tessera/core/sliding_window.hpp"
#include "tessera/core/tile_choice.hpp"
#include "tessera/io/dicomweb.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/vector_export.hpp"

namespace tessera::engine {
namespace {

// What runs: exactly one of a checkpoint and init random; the precision and the tiles.
void validate_model(const InferOptions& o) {
  if (o.checkpoint.empty() == o.init.empty())
    throw Error("infer: give exactly one of --checkpoint CKPT or --init random (with --model PRESET)");
  if (!o.init.empty() && o.init != "random") throw Error("--init '" + o.init + "': only 'random' is supported");
  if (o.precision != "fp32" && o.precision != "bf16")
    throw Error("--precision: '" + o.precision + "' is not one of fp32, bf16");
  if (o.batch < 1) throw Error("--batch: must be >= 1, got " + std::to_string(o.batch));
  if (o.threads < 0) throw Error("--threads: must be >= 0 (0: cores / ranks), got " + std::to_string(o.threads));
  parse_tile_option(o.tile);
  for (int b : o.bands)
    if (b < 1) throw Error("--bands: " + std::to_string(b) + " is not a band; bands count from 1 (--bands 1,2,3,3)");
  if (!o.memory_budget.empty()) parse_memory_size(o.memory_budget);
  if (o.mode != "auto" && o.mode != "tile" && o.mode != "stream")
    throw Error("--mode: '" + o.mode + "' is not one of auto, tile, stream");
  if (o.mode != "stream") return;
  if (parse_tile_option(o.tile) > 0) throw Error("--tile " + o.tile + ": only with --mode tile or auto (a stream has no tiles)");
  if (o.sp > 1) throw Error("--mode stream: not with --sp (it splits tiles across ranks); use --mode tile");
}

// --window and --tta: gaussian windows are one process's whole image, their own geometry.
void validate_window(const InferOptions& o) {
  check_window_option(o.window);
  if (o.tta != "none" && o.tta != "mirror") throw Error("--tta: '" + o.tta + "' is not one of none, mirror");
  if (o.tta == "mirror" && o.window == "exact")
    throw Error("--tta mirror: only with sliding windows (--window gaussian, or auto choosing them)");
  if (o.window != "gaussian") return;
  if (const std::string why = exact_only_flags(o); !why.empty())
    throw Error("--window gaussian: not with " + why + "; use --window exact");
}

void validate_spatial(const InferOptions& o) {
  const std::string sp = "--sp " + std::to_string(o.sp);
  if (o.sp < 1) throw Error(sp + ": must be >= 1");
  if (!o.sp_mesh.empty() && o.sp == 1) throw Error("--sp-mesh " + o.sp_mesh + ": needs --sp N (the mesh's product)");
  if (o.sp > 1 && !o.run_dir.empty())
    throw Error(sp + ": not with --run-dir " + o.run_dir + " (sample-parallel inference spreads whole tiles over the "
                "ranks; use one of them)");
}

// The outputs' own flags: --vectorize's, --probabilities', --t-srs's.
void validate_outputs(const InferOptions& o) {
  if (o.vectorize.empty() && (o.min_area != 0 || o.simplify != 0 || o.vector_background))
    throw Error("--min-area, --simplify and --vector-background need --vectorize OUT.gpkg");
  if (!(o.min_area >= 0 && std::isfinite(o.min_area)))
    throw Error("--min-area: must be a finite area >= 0 (map units^2), got " + std::to_string(o.min_area));
  if (!(o.simplify >= 0 && std::isfinite(o.simplify)))
    throw Error("--simplify: must be a finite tolerance >= 0 (map units), got " + std::to_string(o.simplify));
  if (!o.vectorize.empty()) io::vector_driver_for(o.vectorize);
  if (!o.probabilities.empty() && !o.run_dir.empty())
    throw Error("--probabilities " + o.probabilities + ": not with --run-dir (one process, or --sp N)");
  if (!o.probabilities.empty() && io::is_volume_path(o.probabilities))
    throw Error("--probabilities " + o.probabilities + ": probabilities are a GeoTIFF (.tif)");
  if (o.tr != 0 && o.t_srs.empty()) throw Error("--tr " + std::to_string(o.tr) + ": needs --t-srs");
  if (!(o.tr >= 0 && std::isfinite(o.tr))) throw Error("--tr: must be a positive pixel size, got " + std::to_string(o.tr));
  if (!o.t_srs.empty() && !o.probabilities.empty())
    throw Error("--probabilities " + o.probabilities + ": not with --t-srs (probabilities stay on the input's grid)");
}

// --input / --store dicomweb://: well formed, a series to read, a DICOM SEG to send.
void validate_pacs(const InferOptions& o) {
  if (io::is_dicomweb(o.input)) {
    if (io::parse_dicomweb(o.input, "--input").series.empty())
      throw Error("--input " + o.input + ": name the series to read: .../studies/STUDY_UID/series/SERIES_UID");
    if (!o.series.empty())
      throw Error("--series " + o.series + ": not with --input dicomweb:// (the address names the series)");
  }
  if (o.store.empty()) return;
  if (!io::parse_dicomweb(o.store, "--store").series.empty())
    throw Error("--store " + o.store + ": give the service root or a study (STOW-RS stores to /studies), not a series");
  if (std::filesystem::path(o.output).extension() != ".dcm")
    throw Error("--store " + o.store + ": sends the DICOM SEG; give --output NAME.dcm (got " + o.output + ")");
}

}  // namespace

std::string exact_only_flags(const InferOptions& o) {
  if (o.mode != "auto") return "--mode " + o.mode;
  if (parse_tile_option(o.tile) > 0) return "--tile " + o.tile;
  if (o.sp > 1) return "--sp " + std::to_string(o.sp);
  if (!o.run_dir.empty()) return "--run-dir " + o.run_dir;
  return "";
}

void InferOptions::validate() const {
  if (input.empty()) throw Error("infer: --input is required");
  if (output.empty()) throw Error("infer: --output is required");
  validate_model(*this);
  validate_spatial(*this);
  validate_window(*this);
  validate_outputs(*this);
  validate_pacs(*this);
}

}  // namespace tessera::engine
