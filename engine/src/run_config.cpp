#include "tessera/engine/run_config.hpp"

#include <algorithm>

#include "tessera/engine/options_yaml.hpp"
#include "tessera/core/model_registry.hpp"

namespace tessera::engine {
namespace {

// Messages about a pair name where it is and which one it is.
void locate_pairs(const ConfigSection& data, std::vector<PairConfig>& pairs) {
  const std::vector<ConfigSection> entries = data.list("pairs");
  for (size_t i = 0; i < entries.size() && i < pairs.size(); ++i) {
    pairs[i].where = entries[i].where();
    pairs[i].prefix = entries[i].dotted("");
  }
}

void locate(const ConfigSection& root, RunConfig& c) {
  const ConfigSection data = root.section("data");
  const ConfigSection source = data.section("source");
  c.pairs_where = c.model.is_dsn() ? source.where("pairs") : data.has("dataset") ? data.where("dataset") : data.where("pairs");
  locate_pairs(data, c.data.pairs);
  locate_pairs(source, c.data.source.pairs);
  const std::vector<ConfigSection> targets = data.list("targets");
  for (size_t i = 0; i < targets.size() && i < c.data.targets.size(); ++i) c.data.targets[i].where = targets[i].where();
}

// A DSN: source pairs and target images, no plain pairs.
void require_domains(const RunConfig& c) {
  if (!c.data.pairs.empty())
    throw Error(c.data.pairs.front().where + ": model.kind dsn takes its labelled pairs from data.source.pairs, not data.pairs");
  if (c.data.source.pairs.empty())
    throw Error(c.pairs_where + ": data.source.pairs must list at least one {image, labels} pair (the labelled domain)");
  if (c.data.targets.empty())
    throw Error(c.pairs_where + ": data.targets must list at least one target domain ({images: [...]}) for model.kind dsn");
  for (size_t i = 0; i < c.data.targets.size(); ++i)
    if (c.data.targets[i].images.empty())
      throw Error(c.data.targets[i].where + ": data.targets[" + std::to_string(i) + "].images: at least one image");
}

// data.dataset: instead of pairs; validation by case, not by holdout.
void require_dataset(const RunConfig& c) {
  const DataConfig& d = c.data;
  if (!d.pairs.empty())
    throw Error(c.pairs_where + ": data.dataset and data.pairs: give one of them (the dataset's cases are its pairs)");
  if (c.model.is_dsn()) throw Error(c.pairs_where + ": data.dataset is for model.kind unet (a DSN takes data.source and data.targets)");
  if (d.holdout.fraction > 0)
    throw Error(c.pairs_where + ": data.holdout is for data.pairs; with data.dataset validate on whole cases (data.validation or data.fold/folds)");
  if (!d.validation.empty() && d.folds > 0)
    throw Error(c.pairs_where + ": data.validation and data.folds: give one of them, not both");
  if (d.folds < 0 || (d.folds > 0 && (d.fold < 0 || d.fold >= d.folds)) || (d.folds == 0 && d.fold != 0))
    throw Error(c.pairs_where + ": data.fold " + std::to_string(d.fold) + " of data.folds " + std::to_string(d.folds) +
                ": expected 0 <= fold < folds (folds 0: no folds)");
}

// What the file must have, checked once every key is known to be spelt right.
void require_pairs(const RunConfig& c) {
  if (c.model.kind != "unet" && c.model.kind != "dsn")
    throw Error(c.pairs_where + ": model.kind '" + c.model.kind + "': expected unet or dsn");
  if (!c.data.dataset.empty()) return require_dataset(c);
  if (!c.data.validation.empty() || c.data.folds != 0 || c.data.fold != 0)
    throw Error(c.pairs_where + ": data.validation, data.fold and data.folds need data.dataset");
  if (c.model.is_dsn()) return require_domains(c);
  if (!c.data.targets.empty() || !c.data.source.pairs.empty())
    throw Error(c.pairs_where + ": data.source and data.targets are for model.kind dsn (this model is a plain U-Net)");
  if (c.data.pairs.empty())
    throw Error(c.pairs_where + ": data.pairs must list at least one {image, labels} pair");
  for (const PairConfig& p : c.data.pairs)
    if (p.image.empty() || p.labels.empty())
      throw Error(p.where + ": " + p.prefix + (p.image.empty() ? "image" : "labels") +
                  ": required (every pair names an image and its labels)");
}

// data.classes: a name each, colours as #rrggbb; it fills data.class_names (which, if the file
// gives it too, must say the same). data.background: 0 or none.
void take_class_list(const ConfigSection& root, RunConfig& c) {
  const ConfigSection data = root.section("data");
  const std::vector<ConfigSection> entries = data.list("classes");
  std::vector<std::string> names;
  for (size_t i = 0; i < c.data.classes.size(); ++i) {
    ClassConfig& k = c.data.classes[i];
    k.where = i < entries.size() ? entries[i].where() : c.pairs_where;
    const std::string key = "data.classes[" + std::to_string(i) + "]";
    if (k.name.empty()) throw Error(k.where + ": " + key + ".name: required (what class " + std::to_string(i) + " is)");
    if (!k.color.empty() && !parse_hex_color(k.color))
      throw Error(k.where + ": " + key + ".color '" + k.color + "': expected \"#rrggbb\", e.g. color: \"#1f78b4\" (quoted)");
    names.push_back(k.name);
  }
  if (!c.data.classes.empty()) {
    if (!c.data.class_names.empty() && c.data.class_names != names)
      throw Error(data.where("class_names") + ": data.class_names and data.classes name the classes differently; give "
                  "data.classes only");
    c.data.class_names = names;
  }
  const auto& choices = kBackgroundChoices;
  if (std::find(std::begin(choices), std::end(choices), c.data.background) == std::end(choices))
    throw Error(data.where("background") + ": data.background '" + c.data.background +
                "': expected 0 (class 0 is background) or none (class 0 is a class like any other)");
}

}  // namespace

RunConfig read_run_config(const ConfigFile& file) {
  const ConfigSection root = file.root();
  RunConfig c;
  // The preset first: the other model fields override it.
  const ConfigSection model = root.section("model");
  // `name: se-unet` alone starts from that model's defaults as `preset: se-unet` does.
  const char* start = model.has("preset") || !model.has("name") ? "preset" : "name";
  model.read_as(start, c.model.options, [](const std::string& name) { return model_preset(name); });
  c.in_channels_given = model.has("in_channels");
  c.classes_given = model.has("classes");
  read_fields(root, c);
  file.reject_unknown_keys();  // first: a misspelt key is reported as such, not as a missing one
  locate(root, c);
  require_pairs(c);
  take_class_list(root, c);
  for (const PairConfig& p : c.data.source.pairs)
    if (p.image.empty() || p.labels.empty())
      throw Error(p.where + ": " + p.prefix + (p.image.empty() ? "image" : "labels") +
                  ": required (every source pair names an image and its labels)");
  return c;
}

void take_dataset_classes(RunConfig& c, const std::vector<std::string>& dataset_classes, const std::string& where) {
  const int n = static_cast<int>(dataset_classes.size());
  if (c.data.class_names.empty()) c.data.class_names = dataset_classes;
  if (static_cast<int>(c.data.class_names.size()) != n)
    throw Error(where + ": data.class_names has " + std::to_string(c.data.class_names.size()) + " names but the dataset has " +
                std::to_string(n) + " labels");
  if (!c.classes_given) c.model.options.classes = n;
}

std::vector<Rgb> resolve_class_colors(const DataConfig& d, const std::vector<std::string>& names, int classes,
                                      const std::string& where) {
  if (!d.classes.empty() && static_cast<int>(d.classes.size()) != classes)
    throw Error(where + ": data.classes lists " + std::to_string(d.classes.size()) + " classes but model.classes is " +
                std::to_string(classes) + " (one {name, color} per label value 0.." + std::to_string(classes - 1) + ")");
  std::vector<Rgb> colors;
  for (int k = 0; k < classes; ++k) {
    const std::string given = k < static_cast<int>(d.classes.size()) ? d.classes[size_t(k)].color : std::string();
    const std::string name = k < static_cast<int>(names.size()) ? names[size_t(k)] : std::string();
    colors.push_back(given.empty() ? default_class_color(name, k) : *parse_hex_color(given));
  }
  return colors;
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
      {"train.steps_per_epoch", ""},
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

}  // namespace tessera::engine
