// tessera train --config FILE.yaml [overrides]: train a U-Net on image/label pairs.
//
// The YAML mirrors the options structs (TrainOptions, UNetOptions); flags override it:
//   run_dir: runs/scene
//   model: {preset: unet-tiny, classes: 4}          # any UNetOptions field may follow
//   data:
//     pairs: [{image: scene.tif, labels: scene_labels.tif}]
//     class_names: [background, building, road, water]
//     holdout: {axis: x, fraction: 0.25}
//   train: {tile: 64, batch: 4, steps: 400, learning_rate: 0.002, seed: 1}
#include <filesystem>
#include <fstream>

#include <yaml-cpp/yaml.h>

#include "commands.hpp"
#include "regions.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/trainer.hpp"
#include "tessera/io/open_image.hpp"

namespace tessera::cli {
namespace {

struct Flags {
  std::string config, run_dir;
  std::optional<int64_t> steps, tile;
  std::optional<int> batch, threads;
  std::optional<double> lr;
  std::optional<uint64_t> seed;
  bool no_progress = false;
};

template <class T>
void read_opt(const YAML::Node& n, const char* key, T& out, const std::string& where) {
  if (!n[key]) return;
  try {
    out = n[key].as<T>();
  } catch (const YAML::Exception& e) {
    throw Error(where + ": field '" + key + "' has the wrong type (" + e.msg + ")");
  }
}

UNetOptions model_from_yaml(const YAML::Node& m, const std::string& where) {
  std::string preset = "unet-tiny";
  read_opt(m, "preset", preset, where);
  UNetOptions o = unet_preset(preset);
  read_opt(m, "dims", o.dims, where);
  read_opt(m, "in_channels", o.in_channels, where);
  read_opt(m, "classes", o.classes, where);
  read_opt(m, "levels", o.levels, where);
  read_opt(m, "convs_per_level", o.convs_per_level, where);
  read_opt(m, "base_filters", o.base_filters, where);
  read_opt(m, "kernel", o.kernel, where);
  std::string s;
  if (m["padding"]) { read_opt(m, "padding", s, where); o.padding = parse_padding(s); }
  if (m["norm"]) { read_opt(m, "norm", s, where); o.norm = parse_norm(s); }
  if (m["decoder"]) { read_opt(m, "decoder", s, where); o.decoder = parse_decoder(s); }
  return o;
}

// Relative paths in a config are relative to the config file.
std::string resolve_path(const std::string& config, const std::string& p) {
  namespace fs = std::filesystem;
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (fs::path(config).parent_path() / p).lexically_normal().string();
}

void run(const Flags& f) {
  if (!std::filesystem::is_regular_file(f.config)) throw Error(f.config + ": no such config file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(f.config);
  } catch (const YAML::Exception& e) {
    throw Error(f.config + ": not valid YAML (line " + std::to_string(e.mark.line + 1) + ": " + e.msg + ")");
  }
  UNetOptions model = model_from_yaml(root["model"], f.config);
  TrainOptions t;
  read_opt(root, "run_dir", t.run_dir, f.config);
  t.run_dir = resolve_path(f.config, t.run_dir);
  const YAML::Node tn = root["train"];
  read_opt(tn, "tile", t.tile, f.config);
  read_opt(tn, "batch", t.batch, f.config);
  read_opt(tn, "steps", t.steps, f.config);
  read_opt(tn, "learning_rate", t.learning_rate, f.config);
  read_opt(tn, "seed", t.seed, f.config);
  read_opt(tn, "augment", t.augment, f.config);
  read_opt(tn, "foreground_fraction", t.foreground_fraction, f.config);
  read_opt(tn, "checkpoint_every", t.checkpoint_every, f.config);
  if (!f.run_dir.empty()) t.run_dir = f.run_dir;
  if (f.steps) t.steps = *f.steps;
  if (f.tile) t.tile = *f.tile;
  if (f.batch) t.batch = *f.batch;
  if (f.lr) t.learning_rate = *f.lr;
  if (f.seed) t.seed = *f.seed;
  t.progress = !f.no_progress;

  const YAML::Node dn = root["data"];
  if (!dn || !dn["pairs"] || !dn["pairs"].IsSequence() || dn["pairs"].size() == 0)
    throw Error(f.config + ": data.pairs must list at least one {image, labels} pair");
  Holdout holdout;
  if (dn["holdout"]) {
    read_opt(dn["holdout"], "axis", holdout.axis, f.config);
    read_opt(dn["holdout"], "fraction", holdout.fraction, f.config);
  }
  CheckpointMeta meta;
  read_opt(dn, "class_names", meta.class_names, f.config);

  std::vector<std::unique_ptr<ImageSource>> images, labels;
  std::vector<TrainingPair> pairs;
  for (const auto& p : dn["pairs"]) {
    if (!p["image"] || !p["labels"]) throw Error(f.config + ": every data.pairs entry needs image and labels");
    images.push_back(io::open_image(resolve_path(f.config, p["image"].as<std::string>())));
    labels.push_back(io::open_image(resolve_path(f.config, p["labels"].as<std::string>())));
    holdout.validate(static_cast<int>(images.back()->info().extent.size()));
    if (images.back()->info().extent != labels.back()->info().extent)
      throw Error(labels.back()->info().path + ": label size " + to_string(labels.back()->info().extent) +
                  " differs from image size " + to_string(images.back()->info().extent) + " of " +
                  images.back()->info().path);
    pairs.push_back({images.back().get(), labels.back().get(),
                     training_region(images.back()->info().extent, holdout)});
  }
  if (!root["model"]["in_channels"]) model.in_channels = images.front()->info().channels;
  model.dims = static_cast<int>(images.front()->info().extent.size());
  if (meta.class_names.empty())
    for (int c = 0; c < model.classes; ++c) meta.class_names.push_back("class " + std::to_string(c));
  if (static_cast<int>(meta.class_names.size()) != model.classes)
    throw Error(f.config + ": data.class_names has " + std::to_string(meta.class_names.size()) +
                " names but model.classes is " + std::to_string(model.classes));
  model.validate();
  meta.model = model;
  meta.norm = io::default_normalization(*images.front());

  const int threads = configure_threads(f.threads.value_or(0));
  torch::manual_seed(t.seed);
  UNet net(model);
  std::filesystem::create_directories(t.run_dir);
  {
    std::ofstream resolved(std::filesystem::path(t.run_dir) / "config.yaml");
    YAML::Node out = root;
    out["run_dir"] = t.run_dir;
    out["train"]["tile"] = t.tile;
    out["train"]["batch"] = t.batch;
    out["train"]["steps"] = t.steps;
    out["train"]["learning_rate"] = t.learning_rate;
    out["train"]["seed"] = t.seed;
    resolved << out << '\n';
  }
  std::fprintf(stderr, "train: %d-D U-Net L=%d f=%d, %lld parameters, halo %lld, tiles %lld+%lld (input %lld), %d threads\n",
               model.dims, model.levels, model.base_filters, (long long)unet_parameter_count(model),
               (long long)unet_halo(model), (long long)t.tile, (long long)unet_remainder(model),
               (long long)(t.tile + unet_remainder(model) + 2 * unet_halo(model)), threads);
  const TrainReport r = train(net, pairs, t, meta);
  std::printf("trained %lld steps in %.1f s (%.1f tiles/s), final loss %.4f\ncheckpoint: %s\n", (long long)r.steps,
              r.seconds, r.tiles_per_second, r.final_loss, r.checkpoint.c_str());
}

}  // namespace

void register_train(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a U-Net from a YAML config (flags override the file)");
  static Flags f;
  cmd->add_option("--config", f.config, "YAML file: run_dir, model, data (pairs, class_names, holdout), train")
      ->required();
  cmd->add_option("--run-dir", f.run_dir, "Where metrics.jsonl, config.yaml and checkpoints/ go");
  cmd->add_option("--steps", f.steps, "Optimiser steps");
  cmd->add_option("--tile", f.tile, "Training tile inset side (multiple of 2^(L-1))");
  cmd->add_option("--batch", f.batch, "Tiles per step");
  cmd->add_option("--lr", f.lr, "Learning rate (Adam)");
  cmd->add_option("--seed", f.seed, "Seed for initialisation, tiles and augmentation");
  cmd->add_option("--threads", f.threads, "Intra-op threads (default: cores / ranks on this node)");
  cmd->add_flag("--no-progress", f.no_progress, "No progress line");
  cmd->callback([] { run(f); });
}

}  // namespace tessera::cli
