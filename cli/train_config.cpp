#include "train_config.hpp"

#include "options_yaml.hpp"

namespace tessera::cli {
namespace {

// Messages about a pair name where it is and which one it is.
void locate_pairs(const ConfigSection& root, RunConfig& c) {
  const ConfigSection data = root.section("data");
  c.pairs_where = data.where("pairs");
  const std::vector<ConfigSection> entries = data.list("pairs");
  for (size_t i = 0; i < entries.size() && i < c.data.pairs.size(); ++i) {
    c.data.pairs[i].where = entries[i].where();
    c.data.pairs[i].prefix = entries[i].dotted("");
  }
}

// What the file must have, checked once every key is known to be spelt right.
void require_pairs(const RunConfig& c) {
  if (c.data.pairs.empty())
    throw Error(c.pairs_where + ": data.pairs must list at least one {image, labels} pair");
  for (const PairConfig& p : c.data.pairs)
    if (p.image.empty() || p.labels.empty())
      throw Error(p.where + ": " + p.prefix + (p.image.empty() ? "image" : "labels") +
                  ": required (every pair names an image and its labels)");
}

}  // namespace

RunConfig read_run_config(const ConfigFile& file) {
  const ConfigSection root = file.root();
  RunConfig c;
  // The preset first: the other model fields override it.
  const ConfigSection model = root.section("model");
  model.read_as("preset", c.model.options, [](const std::string& name) { return unet_preset(name); });
  c.in_channels_given = model.has("in_channels");
  read_fields(root, c);
  file.reject_unknown_keys();  // first: a misspelt key is reported as such, not as a missing one
  locate_pairs(root, c);
  require_pairs(c);
  return c;
}

std::string resolved_config_yaml(const RunConfig& c) {
  YAML::Emitter out;
  out << to_yaml(c);
  return std::string(out.c_str()) + "\n";
}

const std::vector<TrainFlag>& train_flags() {
  static const std::vector<TrainFlag> flags = {
      {"run_dir", ""},
      {"model.padding", ""},
      {"train.steps", ""},
      {"train.tile", ""},
      {"train.batch", ""},
      {"train.learning_rate", "--lr"},
      {"train.seed", ""},
      {"train.warmup_steps", ""},
      {"parallel.dp", ""},
      {"parallel.pp", ""},
      {"parallel.sp", ""},
      {"parallel.sp_mesh", ""},
      {"parallel.micro_batches", ""},
      {"parallel.schedule", ""},
      {"parallel.activation_checkpoint", ""},
      {"parallel.fusion_mib", ""},
      {"parallel.scale_learning_rate", "--scale-lr"},
  };
  return flags;
}

}  // namespace tessera::cli
