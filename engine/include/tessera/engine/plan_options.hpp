#pragma once
// What `tessera plan` is asked, declared once: fields() drives the command's flags (each key
// is its flag, `device_memory` → --device-memory; `spatial`, a bool that defaults to true, is
// turned off by --no-spatial), their help and shown defaults, and validate(), whose messages
// name the flags. The model is a UNetOptions (its own declaration: --model PRESET plus
// --levels, --base-filters, …), resolved by the caller. Torch-free.
//
// Numbers that were "not given" are 0 here: --tile 0 lets the planner choose, --throughput 0
// takes the calibration (or the default CPU figure), --calibration-tile 0 is 128 (3-D 32).
#include <cstdint>
#include <string>

#include "tessera/core/unet_spec.hpp"

namespace tessera::engine {

struct PlanJobOptions {
  UNetOptions model = unet_preset("unet-tiny");  ///< resolved from --model PRESET and its overrides (not a flag)
  std::string model_preset = "unet-tiny";        ///< its preset name: the calibration entry, the report
  // the problem
  std::string image;              ///< W×H or W×H×D; required unless calibrate or dataset
  std::string dataset;            ///< an MSD / nnU-Net folder or a training config: its fingerprint and training plan (dataset_plan.hpp)
  int devices = 1;
  int domains = 1;                ///< domains (a DSN's): the process grid's fourth axis, each its own devices
  double device_memory = 16;      ///< GiB per device
  bool train = false;             ///< the default: plan training
  bool infer = false;             ///< plan inference instead
  int64_t tile = 0;               ///< the inset every step must see whole; 0 = the planner chooses
  bool spatial = true;            ///< consider spatial parallelism (--no-spatial: not)
  std::string schedule = "1f1b";  ///< 1f1b or gpipe
  std::string activation_checkpoint = "auto";  ///< auto, never, always, except_last
  // the machine
  double throughput = 0;    ///< sustained GFLOP/s per device; 0 = the calibration's or the default
  std::string calibration;  ///< "" = ~/.cache/tessera/calibration.json
  std::string cluster;      ///< a cluster description whose devices and network the plan prices (clusters/*.yaml)
  std::string simulate;     ///< a cluster description: the chosen layout also simulated on it
  // what it prints
  bool json = false;
  // --calibrate: measure this machine instead of planning
  bool calibrate = false;
  int64_t calibration_tile = 0;  ///< 0 = 128 (2-D) or 32 (3-D)
  int threads = 2;               ///< intra-op threads while calibrating
  int calibration_batch = 1;     ///< tiles per timed pass of each layer (the run's micro-batch)
  bool calibration_channels_last = false;  ///< time the layers channels-last (as train.channels_last)

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(PlanJobOptions& o, V& v) {
  v.field("image", o.image, "Image extent W×H or W×H×D (pixels/voxels)");
  v.field("dataset", o.dataset,
          "An MSD / nnU-Net dataset folder (dataset.json, imagesTr, labelsTr), or a training config (YAML) whose "
          "data.pairs are the cases: print its fingerprint (spacings, shapes, "
          "foreground intensities, class frequencies) and the training plan derived from it (spacing, patch, pooling, "
          "batch, filters, norm, schedule, sampling, augmentation), each choice with its reason, sized to --devices and "
          "--device-memory (0: this machine, half of MemAvailable); --json: as JSON");
  v.field("devices", o.devices, "Number of devices (ranks)");
  v.field("domains", o.domains,
          "Domains (a Domain Separation Network's, one image each): training plans also search the process grid "
          "domains × dp × pp × sp and say why each other (pp, sp) lost");
  v.field("device_memory", o.device_memory, "Memory per device in GiB");
  v.field("train", o.train, "Plan training (default)");
  v.field("infer", o.infer, "Plan inference");
  v.field("tile", o.tile, "Tile inset every step must see whole (0, the default: the planner chooses)");
  v.field("spatial", o.spatial, "Spatial parallelism (sp) among the layouts searched (--no-spatial: not considered)");
  v.field("json", o.json, "Print the layout as JSON");
  v.field("schedule", o.schedule, "Pipeline schedule: 1f1b or gpipe");
  v.field("activation_checkpoint", o.activation_checkpoint,
          "Activation checkpointing: auto (the planner chooses), never, always, except_last");
  v.field("throughput", o.throughput,
          "Sustained GFLOP/s per device (overrides calibration; 0, the default: the calibration's or a CPU figure)");
  v.field("calibration", o.calibration, "Calibration file (default ~/.cache/tessera/calibration.json)");
  v.field("cluster", o.cluster,
          "Price the plan on this cluster description (clusters/*.yaml): its device's memory (instead of "
          "--device-memory), FP32 peak × sustained efficiency e_max (or this machine's calibration for a 'calibrated' "
          "device), memory bandwidth and network");
  v.field("simulate", o.simulate,
          "Also simulate the chosen layout on this cluster description (clusters/*.yaml) and print it beside the plan");
  v.field("calibrate", o.calibrate,
          "Measure this machine's forward + backward speed and per-layer memory for --model and store them");
  v.field("calibration_tile", o.calibration_tile, "Inset of the tile --calibrate measures (0, the default: 128, 3-D 32)");
  v.field("threads", o.threads, "Intra-op threads for --calibrate");
  v.field("calibration_batch", o.calibration_batch,
          "Tiles per timed pass of each layer in --calibrate: the micro-batch of the run the times will price "
          "(layer times are stored per tile)");
  v.field("calibration_channels_last", o.calibration_channels_last,
          "Time --calibrate's layers with channels-last weights and activations, as train.channels_last (default: "
          "contiguous, as bench pipeline runs)");
}

}  // namespace tessera::engine
