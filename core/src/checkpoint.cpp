#include "tessera/core/checkpoint.hpp"

#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/model_json.hpp"

namespace tessera {
namespace {

constexpr int kFormatVersion = 1;

std::string meta_to_json(const CheckpointMeta& m) {
  nlohmann::json j;
  j["format"] = "tessera-checkpoint";
  j["version"] = kFormatVersion;
  j["model"] = m.model;
  j["normalization"] = {{"offset", m.norm.offset}, {"scale", m.norm.scale}};
  j["class_names"] = m.class_names;
  j["step"] = m.step;
  j["epoch"] = m.epoch;
  if (!m.trainer_state.empty()) j["trainer_state"] = m.trainer_state;
  return j.dump();
}

CheckpointMeta meta_from_json(const std::string& path, const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    if (j.at("format") != "tessera-checkpoint") throw Error(path + ": not a Tessera checkpoint");
    if (j.at("version").get<int>() > kFormatVersion)
      throw Error(path + ": checkpoint format version " + std::to_string(j.at("version").get<int>()) +
                  " is newer than this build understands (" + std::to_string(kFormatVersion) + ")");
    CheckpointMeta m;
    m.model = j.at("model").get<UNetOptions>();
    m.norm.offset = j.at("normalization").at("offset").get<std::vector<float>>();
    m.norm.scale = j.at("normalization").at("scale").get<std::vector<float>>();
    m.class_names = j.at("class_names").get<std::vector<std::string>>();
    m.step = j.at("step");
    m.epoch = j.at("epoch");
    if (j.contains("trainer_state")) m.trainer_state = j.at("trainer_state").get<std::string>();
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": checkpoint description is damaged (" + e.what() + ")");
  }
}

torch::serialize::InputArchive open_archive(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw Error(path + ": no such checkpoint file");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    throw Error(path + ": not a readable checkpoint (truncated or not a Tessera/LibTorch archive)");
  }
  return archive;
}

CheckpointMeta read_meta(const std::string& path, torch::serialize::InputArchive& archive) {
  c10::IValue meta;
  if (!archive.try_read("tessera_meta", meta) || !meta.isString())
    throw Error(path + ": not a Tessera checkpoint (no description inside)");
  return meta_from_json(path, meta.toStringRef());
}

}  // namespace

void to_json(nlohmann::json& j, const UNetOptions& o) {
  j = {{"dims", o.dims},
       {"in_channels", o.in_channels},
       {"classes", o.classes},
       {"levels", o.levels},
       {"convs_per_level", o.convs_per_level},
       {"base_filters", o.base_filters},
       {"kernel", o.kernel},
       {"padding", to_string(o.padding)},
       {"norm", to_string(o.norm)},
       {"decoder", to_string(o.decoder)}};
}

void from_json(const nlohmann::json& j, UNetOptions& o) {
  o.dims = j.at("dims");
  o.in_channels = j.at("in_channels");
  o.classes = j.at("classes");
  o.levels = j.at("levels");
  o.convs_per_level = j.at("convs_per_level");
  o.base_filters = j.at("base_filters");
  o.kernel = j.at("kernel");
  o.padding = parse_padding(j.at("padding"));
  o.norm = parse_norm(j.at("norm"));
  o.decoder = parse_decoder(j.at("decoder"));
}

void save_checkpoint(const std::string& path, UNet& net, const CheckpointMeta& meta,
                     torch::optim::Optimizer* optimizer) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  const std::string tmp = path + ".partial-" + std::to_string(::getpid());
  try {
    torch::serialize::OutputArchive archive;
    archive.write("tessera_meta", c10::IValue(meta_to_json(meta)));
    torch::serialize::OutputArchive model;
    net->save(model);
    archive.write("model", model);
    if (optimizer) {
      torch::serialize::OutputArchive opt;
      optimizer->save(opt);
      archive.write("optimizer", opt);
    }
    archive.save_to(tmp);
    fs::rename(tmp, target);
  } catch (const std::exception& e) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Error(path + ": cannot write checkpoint: " + e.what());
  }
}

LoadedCheckpoint load_checkpoint(const std::string& path) {
  auto archive = open_archive(path);
  LoadedCheckpoint out;
  out.meta = read_meta(path, archive);
  out.net = UNet(out.meta.model);
  try {
    torch::serialize::InputArchive model;
    archive.read("model", model);
    out.net->load(model);
  } catch (const c10::Error& e) {
    throw Error(path + ": checkpoint parameters do not match its description (damaged file?)");
  }
  return out;
}

void load_optimizer_state(const std::string& path, torch::optim::Optimizer& optimizer) {
  auto archive = open_archive(path);
  torch::serialize::InputArchive opt;
  if (!archive.try_read("optimizer", opt)) throw Error(path + ": checkpoint holds no optimiser state");
  try {
    optimizer.load(opt);
  } catch (const c10::Error& e) {
    throw Error(path + ": optimiser state does not match this model");
  }
}

CheckpointMeta read_checkpoint_meta(const std::string& path) {
  auto archive = open_archive(path);
  return read_meta(path, archive);
}

}  // namespace tessera
