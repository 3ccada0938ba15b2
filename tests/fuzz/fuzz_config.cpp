// Fuzz target: the YAML config loader (cli/config_file.hpp) on arbitrary text.
// Parses the input as a config file, reads it the way `tessera train` does (the sections and
// keys of cmd_train.cpp's read_config, each as the type the trainer asks for), then reads
// every key the document has as each value type, and checks for unknown keys.
// The contract under test: any input parses or throws one tessera::Error whose message starts
// with the file name; no crash, no hang, no other exception.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/engine/config_file.hpp"
#include "fuzz_input.hpp"

namespace {

using tessera::engine::ConfigFile;
using tessera::engine::ConfigSection;

constexpr char kName[] = "fuzz.yaml";

// Reads `key` as every type a config value may have; a type mismatch is an Error.
void read_as_every_type(const ConfigSection& s, const std::string& key) {
  const auto attempt = [&](auto value) {
    try {
      s.read(key, value);
    } catch (const tessera::Error& e) {
      TESSERA_FUZZ_EXPECT(std::strncmp(e.what(), kName, sizeof kName - 1) == 0);
    }
  };
  attempt(int{});
  attempt(int64_t{});
  attempt(double{});
  attempt(float{});
  attempt(bool{});
  attempt(std::string{});
  attempt(std::vector<double>{});
  attempt(std::vector<float>{});
  attempt(std::vector<std::string>{});
}

// The shape `tessera train` reads (cli/cmd_train.cpp read_config): sections, lists, keys.
void read_like_train(const ConfigSection& root) {
  std::string text;
  int number = 0;
  double real = 0;
  bool flag = false;
  std::vector<float> weights;
  std::vector<std::string> names;
  const ConfigSection model = root.section("model");
  for (const char* key : {"preset", "padding", "norm", "decoder"}) model.read(key, text);
  for (const char* key : {"dims", "in_channels", "classes", "levels", "convs_per_level", "base_filters", "kernel"})
    model.read(key, number);
  root.read("run_dir", text);
  const ConfigSection train = root.section("train");
  for (const char* key : {"tile", "batch", "accumulate", "steps", "steps_per_epoch", "seed", "checkpoint_every",
                          "keep_last", "early_stopping", "prefetch", "warmup_steps", "step_size"})
    train.read(key, number);
  for (const char* key : {"foreground_fraction", "augment_intensity_scale", "learning_rate", "momentum",
                          "weight_decay", "gamma", "power", "min_lr_fraction", "grad_clip"})
    train.read(key, real);
  for (const char* key : {"augment", "sync_batch_norm", "channels_last", "augment_rotate90", "validate"})
    train.read(key, flag);
  train.read("optimizer", text);
  for (const ConfigSection& stage : train.list("curriculum")) {
    stage.read("epoch", number);
    stage.read("tile", number);
  }
  const ConfigSection loss = train.section("loss");
  loss.read("kind", text);
  loss.read("include_background", flag);
  loss.read("class_weights", weights);
  const ConfigSection parallel = root.section("parallel");
  for (const char* key : {"micro_batches", "dp", "pp", "sp"}) parallel.read(key, number);
  parallel.read("fusion_mib", real);
  const ConfigSection data = root.section("data");
  data.section("holdout").read("fraction", real);
  data.read("class_names", names);
  (void)data.where("pairs");
  for (const ConfigSection& pair : data.list("pairs")) {
    (void)pair.where();
    (void)pair.dotted("");
    for (const char* key : {"image", "labels", "label_attribute", "label_layer"}) pair.read(key, text);
  }
}

// Every key the document has, at any depth, read as every type (keys become known).
void read_everything(const ConfigSection& section, const YAML::Node& node, int depth) {
  if (!node.IsMap() || depth > 8) return;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) continue;
    const std::string key = it->first.Scalar();
    (void)section.has(key);
    (void)section.where(key);
    read_as_every_type(section, key);
    try {
      if (it->second.IsMap()) read_everything(section.section(key), it->second, depth + 1);
      if (it->second.IsSequence()) {
        const YAML::Node items = it->second;
        size_t i = 0;
        for (const ConfigSection& entry : section.list(key)) {
          if (i >= items.size()) break;  // a key given twice: list() reads the first one
          read_everything(entry, items[i++], depth + 1);
        }
      }
    } catch (const tessera::Error& e) {
      TESSERA_FUZZ_EXPECT(std::strncmp(e.what(), kName, sizeof kName - 1) == 0);
    }
  }
}

void expect_named(const tessera::Error& e) {
  TESSERA_FUZZ_EXPECT(std::strncmp(e.what(), kName, sizeof kName - 1) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const ConfigFile file = ConfigFile::parse(text, kName);
    try {
      read_like_train(file.root());
      file.reject_unknown_keys();  // a train-shaped file: misspelt keys are refused here
    } catch (const tessera::Error& e) {
      expect_named(e);
    }
    const ConfigFile again = ConfigFile::parse(text, kName);
    read_everything(again.root(), again.document(), 0);
    try {
      again.reject_unknown_keys();  // every key was read: only duplicates or odd keys remain
    } catch (const tessera::Error& e) {
      expect_named(e);
    }
    (void)tessera::engine::closest_key(text.substr(0, 80), {"learning_rate", "tile", "batch", "steps"});
  } catch (const tessera::Error& e) {
    expect_named(e);
  }
  return 0;
}
