#include "tessera/core/checkpoint.hpp"

#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/model_json.hpp"

namespace tessera {
namespace {

// 1: a LibTorch archive. 2: the archive followed by a checksum trailer (below).
constexpr int kFormatVersion = 2;

// The trailer after the archive bytes, 24 bytes, little-endian:
//   u64 archive length | u32 CRC-32 (zlib) of the archive | u32 zero | 8-byte magic.
// Ending with the magic lets a reader tell a checksummed file from an older one; the length
// tells a file cut short or grown from an intact one.
constexpr char kMagic[8] = {'T', 'S', 'R', 'A', 'C', 'R', 'C', '1'};
constexpr size_t kTrailerBytes = 24;

uint32_t crc32_of(const char* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (size > 0) {  // zlib's length is a uInt: feed large archives in chunks
    const uInt n = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), n);
    data += n;
    size -= n;
  }
  return static_cast<uint32_t>(crc);
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::string trailer_for(const std::string& archive) {
  std::string t;
  put_le(t, archive.size(), 8);
  put_le(t, crc32_of(archive.data(), archive.size()), 4);
  put_le(t, 0, 4);
  t.append(kMagic, sizeof kMagic);
  return t;
}

std::string meta_to_json(const CheckpointMeta& m) {
  nlohmann::json j = m;
  j["format"] = "tessera-checkpoint";
  j["version"] = kFormatVersion;
  return j.dump();
}

struct Description {
  CheckpointMeta meta;
  int version = 0;
};

Description meta_from_json(const std::string& path, const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    if (j.at("format") != "tessera-checkpoint") throw Error(path + ": not a Tessera checkpoint");
    Description d;
    d.version = j.at("version").get<int>();
    if (d.version > kFormatVersion)
      throw Error(path + ": checkpoint format version " + std::to_string(d.version) +
                  " is newer than this build understands (" + std::to_string(kFormatVersion) + ")");
    d.meta = j.get<CheckpointMeta>();
    return d;
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": checkpoint description is damaged (" + e.what() + ")");
  }
}

// The file's archive bytes; `verified` when a trailer vouched for them. A trailer that does
// not match is an error: the file is damaged and nothing of it is used.
struct Payload {
  std::string bytes;
  size_t size = 0;
  bool verified = false;
};

Payload read_payload(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(path + ": no such checkpoint file");
  Payload p;
  {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream all;
    all << in.rdbuf();
    if (!in) throw Error(path + ": cannot read the checkpoint file");
    p.bytes = std::move(all).str();
  }
  p.size = p.bytes.size();
  if (p.size < kTrailerBytes || std::memcmp(p.bytes.data() + p.size - sizeof kMagic, kMagic, sizeof kMagic) != 0)
    return p;  // no trailer: older than checksums, or cut short (told apart by the version inside)
  const char* t = p.bytes.data() + p.size - kTrailerBytes;
  const uint64_t length = get_le(t, 8);
  const uint32_t crc = static_cast<uint32_t>(get_le(t + 8, 4));
  if (length != p.size - kTrailerBytes)
    throw Error(path + ": checkpoint is damaged: " + std::to_string(p.size) + " bytes where its checksum record says " +
                std::to_string(length + kTrailerBytes) + "; not loaded");
  if (crc32_of(p.bytes.data(), length) != crc)
    throw Error(path + ": checkpoint is damaged: checksum mismatch (bytes changed since it was written); not loaded");
  p.size = length;
  p.verified = true;
  return p;
}

void warn_unverified_once(const std::string& path) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard lock(mutex);
  if (warned.insert(path).second)
    std::fprintf(stderr, "tessera: warning: %s: written before checkpoints carried a checksum; loaded unverified\n",
                 path.c_str());
}

struct OpenCheckpoint {
  torch::serialize::InputArchive archive;
  CheckpointMeta meta;
};

OpenCheckpoint open_checkpoint(const std::string& path) {
  const Payload payload = read_payload(path);
  OpenCheckpoint out;
  try {
    out.archive.load_from(payload.bytes.data(), payload.size);
  } catch (const std::exception&) {
    throw Error(path + ": not a readable checkpoint (truncated or not a Tessera/LibTorch archive)");
  }
  c10::IValue meta;
  if (!out.archive.try_read("tessera_meta", meta) || !meta.isString())
    throw Error(path + ": not a Tessera checkpoint (no description inside)");
  const Description d = meta_from_json(path, meta.toStringRef());
  if (!payload.verified) {
    if (d.version >= 2)
      throw Error(path + ": checkpoint is damaged: its checksum record is missing (file cut short?); not loaded");
    warn_unverified_once(path);
  }
  out.meta = d.meta;
  return out;
}

}  // namespace

// Driven by the one field declaration (options_binding.hpp), as the YAML reader and writer are.
void to_json(nlohmann::json& j, const UNetOptions& o) { options_to_json(j, o); }
void from_json(const nlohmann::json& j, UNetOptions& o) { options_from_json(j, o); }

void to_json(nlohmann::json& j, const CheckpointMeta& m) {
  j = {{"model", m.model},
       {"normalization",
        {{"offset", m.norm.offset},
         {"scale", m.norm.scale},
         {"kind", m.norm.kind},
         {"clip_low", m.norm.clip_low},
         {"clip_high", m.norm.clip_high},
         {"mask", m.norm.mask}}},
       {"class_names", m.class_names},
       {"background", m.background},
       {"step", m.step},
       {"epoch", m.epoch}};
  if (m.resampling.enabled())
    j["resampling"] = {{"spacing", m.resampling.spacing}, {"image", m.resampling.image}, {"labels", m.resampling.labels}};
  if (!m.class_colors.empty()) {
    std::vector<std::string> hex;
    for (const Rgb& c : m.class_colors) hex.push_back(hex_color(c));
    j["class_colors"] = hex;
  }
  if (!(m.inputs == TrainingInputs{}))
    j["inputs"] = {{"modality", m.inputs.modality}, {"low", m.inputs.low},          {"high", m.inputs.high},
                   {"spacing", m.inputs.spacing},   {"spacing_unit", m.inputs.spacing_unit}};
  if (!m.training_window.empty()) j["training_window"] = m.training_window;
  if (!m.trainer_state.empty()) j["trainer_state"] = m.trainer_state;
  if (!m.extra_model.empty()) j["extra_model"] = nlohmann::json::parse(m.extra_model);
}

void from_json(const nlohmann::json& j, CheckpointMeta& m) {
  m.model = j.at("model").get<UNetOptions>();
  const nlohmann::json& norm = j.at("normalization");
  m.norm.offset = norm.at("offset").get<std::vector<float>>();
  m.norm.scale = norm.at("scale").get<std::vector<float>>();
  // Files written before normalisation kinds: an explicit affine map.
  m.norm.kind = norm.value("kind", std::string("affine"));
  m.norm.clip_low = norm.value("clip_low", std::vector<float>{});
  m.norm.clip_high = norm.value("clip_high", std::vector<float>{});
  m.norm.mask = norm.value("mask", false);
  m.resampling = {};
  if (j.contains("resampling")) {
    const nlohmann::json& r = j.at("resampling");
    m.resampling.spacing = r.at("spacing").get<std::vector<double>>();
    m.resampling.image = r.value("image", std::string("linear"));
    m.resampling.labels = r.value("labels", std::string("nearest"));
  }
  m.class_names = j.at("class_names").get<std::vector<std::string>>();
  m.class_colors.clear();
  for (const std::string& hex : j.value("class_colors", std::vector<std::string>{})) {
    const std::optional<Rgb> c = parse_hex_color(hex);
    if (!c) throw nlohmann::json::other_error::create(501, "class_colors: '" + hex + "' is not #rrggbb", &j);
    m.class_colors.push_back(*c);
  }
  m.background = j.value("background", std::string("0"));
  m.training_window = j.value("training_window", std::vector<int64_t>{});
  m.inputs = {};
  if (j.contains("inputs")) {
    const nlohmann::json& in = j.at("inputs");
    m.inputs.modality = in.value("modality", std::string());
    m.inputs.low = in.value("low", std::vector<double>{});
    m.inputs.high = in.value("high", std::vector<double>{});
    m.inputs.spacing = in.value("spacing", std::vector<double>{});
    m.inputs.spacing_unit = in.value("spacing_unit", std::string());
  }
  m.step = j.value("step", int64_t{0});
  m.epoch = j.value("epoch", int64_t{0});
  m.trainer_state = j.contains("trainer_state") ? j.at("trainer_state").get<std::string>() : std::string();
  m.extra_model = j.contains("extra_model") ? j.at("extra_model").dump() : std::string();
}

std::string checkpoint_bytes(UNet& net, const CheckpointMeta& meta, torch::optim::Optimizer* optimizer,
                             const torch::nn::Module* extra) {
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
    if (extra) {
      torch::serialize::OutputArchive parts;
      extra->save(parts);
      archive.write("extra", parts);
    }
    std::ostringstream bytes;
    archive.save_to(bytes);
    std::string file = std::move(bytes).str();
    file += trailer_for(file);
    return file;
  } catch (const std::exception& e) {
    throw Error(std::string("cannot serialise the checkpoint: ") + e.what());
  }
}

LoadedCheckpoint load_checkpoint(const std::string& path) {
  OpenCheckpoint ck = open_checkpoint(path);
  LoadedCheckpoint out;
  out.meta = std::move(ck.meta);
  try {
    out.net = UNet(out.meta.model);
    torch::serialize::InputArchive model;
    ck.archive.read("model", model);
    out.net->load(model);
  } catch (const Error& e) {
    throw Error(path + ": checkpoint describes an invalid model (" + e.what() + ")");
  } catch (const std::exception& e) {
    throw Error(path + ": checkpoint parameters do not match its description (damaged file?)");
  }
  return out;
}

void load_checkpoint_extra(const std::string& path, torch::nn::Module& module) {
  OpenCheckpoint ck = open_checkpoint(path);
  torch::serialize::InputArchive extra;
  if (!ck.archive.try_read("extra", extra)) throw Error(path + ": checkpoint holds only a U-Net, no parts beyond it (not a DSN checkpoint)");
  try {
    module.load(extra);
  } catch (const std::exception&) {
    throw Error(path + ": the parts beyond the U-Net do not match the checkpoint description (damaged file?)");
  }
}

void load_optimizer_state(const std::string& path, torch::optim::Optimizer& optimizer) {
  OpenCheckpoint ck = open_checkpoint(path);
  torch::serialize::InputArchive opt;
  if (!ck.archive.try_read("optimizer", opt)) throw Error(path + ": checkpoint holds no optimiser state");
  try {
    optimizer.load(opt);
  } catch (const std::exception& e) {
    throw Error(path + ": optimiser state does not match this model");
  }
}

CheckpointMeta read_checkpoint_meta(const std::string& path) { return open_checkpoint(path).meta; }

void verify_checkpoint(const std::string& path) { open_checkpoint(path); }

}  // namespace tessera
