#pragma once
// What `tessera simulate` is asked, declared once: fields() drives the command's flags (each
// key is its flag, `micro_batches` → --micro-batches), their help and shown defaults, and
// validate(), whose messages name the flags. The model is a UNetOptions (--model PRESET plus
// its override flags) set by the caller; a seed U-Net (s0-…, one logit) is not validated as
// the built-in family is. Torch-free.
//
// Numbers that were "not given" are 0 here: --tiles 0 counts the tiles of --image × --images,
// --nodes 0 uses all of the cluster's, --tile 0 is 512 (or the image, when smaller) unless
// --input-side gives the network's input side instead.
#include <cstdint>
#include <string>

#include "tessera/core/unet_spec.hpp"

namespace tessera::engine {

struct SimulateOptions {
  UNetOptions model = unet_preset("unet-tiny");  ///< --model PRESET with its overrides (not a flag)
  std::string model_preset = "unet-tiny";        ///< its preset name: the calibration entry, the report
  std::string cluster;                           ///< required: a cluster description (clusters/*.yaml)
  // the work
  std::string image = "10000x10000";
  int64_t images = 1;
  int64_t tiles = 0;  ///< 0 = the tiles of `images` images of `image`
  int64_t tile = 0;        ///< tile inset, as in `tessera plan` (input side = inset + r + 2ε); 0 = 512, clamped to the image
  int64_t input_side = 0;  ///< the network's input side instead of `tile` (a paper's tile size); 0 = from `tile`
  bool infer = false;
  // the layout
  int nodes = 0;  ///< 0 = the cluster's
  int dp = 1, pp = 1, sp = 1;
  int micro_batches = 1;
  int batch = 1;  ///< tiles per micro-batch
  bool adam = false;
  std::string schedule = "gpipe";  ///< gpipe or 1f1b
  std::string balance = "time";    ///< time, memory or naive
  std::string precision = "fp32";  ///< fp32, fp16 or bf16
  std::string activation_checkpoint = "never";  ///< never, always or except_last (training)
  double per_tile_overhead = 0;    ///< host seconds per tile
  // what it writes
  std::string gantt;  ///< "" = none
  bool json = false;
  bool seed_tables = false;
  std::string calibration;  ///< "" = ~/.cache/tessera/calibration.json

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(SimulateOptions& o, V& v) {
  v.field("cluster", o.cluster, "Cluster description (YAML), e.g. clusters/summit.yaml");
  v.field("image", o.image, "Image extent WxH or WxHxD");
  v.field("images", o.images, "Images per pass");
  v.field("tiles", o.tiles, "Tiles per pass (overrides --image / --images; 0, the default: from them)");
  v.field("nodes", o.nodes, "Nodes used (0, the default: the cluster's)");
  v.field("dp", o.dp, "Data-parallel replicas");
  v.field("pp", o.pp, "Pipeline stages per replica");
  v.field("sp", o.sp, "Spatial ranks per tile (same padding; not with --pp)");
  v.field("micro_batches", o.micro_batches, "Micro-batches per step and replica");
  v.field("batch", o.batch, "Tiles per micro-batch");
  v.field("adam", o.adam, "Add the Adam update after the allreduce (training)");
  v.field("tile", o.tile,
          "Tile inset: the output pixels each tile keeps, as in `tessera plan` (a multiple of the model's alignment; the "
          "network reads inset + r + 2ε). 0, the default: 512, or the image's largest side when smaller");
  v.field("input_side", o.input_side,
          "The network's input side per tile instead of --tile (e.g. a paper's 1434); 0, the default: from --tile");
  v.field("schedule", o.schedule, "gpipe or 1f1b");
  v.field("balance", o.balance, "Stage balance: time, memory or naive");
  v.field("precision", o.precision, "fp32, fp16 or bf16");
  v.field("activation_checkpoint", o.activation_checkpoint,
          "never, always or except_last: recompute each micro-batch's forward before its backward (GPipe's "
          "checkpoint; --seed-tables runs `always` unless another is given)");
  v.field("per_tile_overhead", o.per_tile_overhead, "Host seconds per tile (window extraction, stitching)");
  v.field("infer", o.infer, "Inference (forward only) instead of training");
  v.field("gantt", o.gantt, "Write the step's schedule as an SVG Gantt chart");
  v.field("json", o.json, "Print the result as JSON");
  v.field("seed_tables", o.seed_tables,
          "Print the seed's pipeline experiments on one node: speed-up of 1…6 stages at 1434², and of 6 stages at 192, "
          "512, 1024");
  v.field("calibration", o.calibration, "Calibration file (default ~/.cache/tessera/calibration.json)");
}

}  // namespace tessera::engine
