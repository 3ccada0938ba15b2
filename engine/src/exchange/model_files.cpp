// model.json and model.pt: what `tessera export` writes and `tessera import` reads.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <torch/serialize.h>

#include "exchange_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/io/pickle.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::engine::exchange {
namespace {

namespace fs = std::filesystem;

constexpr const char* kArchFormat = "tessera-model";
constexpr int kArchVersion = 1;

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The "format" and "version" keys first, then the checkpoint's description.
CheckpointMeta parse_arch(const std::string& path, std::ifstream& in) {
  try {
    const auto j = nlohmann::json::parse(in);
    if (!j.is_object() || j.value("format", "") != kArchFormat)
      throw Error(path + ": not a Tessera model description (\"format\": \"" + kArchFormat + "\" missing)");
    if (j.at("version").get<int>() > kArchVersion)
      throw Error(path + ": model description version " + std::to_string(j.at("version").get<int>()) +
                  " is newer than this build understands (" + std::to_string(kArchVersion) + ")");
    CheckpointMeta m = j.get<CheckpointMeta>();
    m.trainer_state.clear();
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": model description is damaged (" + first_line(e.what()) + ")");
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind(path, 0) == 0) throw;
    throw Error(path + ": " + msg);
  }
}

// The pickle of a torch.save zip, its tensors read from the zip's data/ records.
c10::IValue unpickle(const std::string& path, const std::string& hint) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  if (!reader.hasRecord("data.pkl")) throw Error(path + ": not a torch.save file (no data.pkl inside)" + hint);
  auto [pkl_ptr, pkl_size] = reader.getRecord("data.pkl");
  const std::string pkl = io::plain_dict_pickle(std::string(static_cast<const char*>(pkl_ptr.get()), pkl_size));
  size_t pos = 0;
  auto read = [&](char* buf, size_t n) {
    n = std::min(n, pkl.size() - pos);
    std::memcpy(buf, pkl.data() + pos, n);
    pos += n;
    return n;
  };
  auto read_record = [&](const std::string& name) { return std::get<0>(reader.getRecord("data/" + name)); };
  torch::jit::Unpickler unpickler(read, nullptr, nullptr, read_record, c10::Device(c10::kCPU));
  unpickler.set_version(reader.version());
  return unpickler.parse_ivalue();
}

}  // namespace

std::string default_arch(const std::string& weights) { return fs::path(weights).replace_extension(".json").string(); }

void save_tensor_file(const std::string& path, const c10::IValue& value) {
  const std::vector<char> bytes = torch::pickle_save(value);
  write_file_atomically(path, {std::string_view(bytes.data(), bytes.size())});
}

std::string shape_str(c10::IntArrayRef s) { return c10::str(s); }

nlohmann::json arch_to_json(const CheckpointMeta& m) {
  const UNetOptions& o = m.model;
  nlohmann::json j = m;
  j.erase("trainer_state");
  j["format"] = kArchFormat;
  j["version"] = kArchVersion;
  j["layout"] = o.dims == 2 ? "NCHW" : "NCDHW";
  // For the caller choosing input sizes; derived, ignored on import.
  j["geometry"] = {{"halo", unet_halo(o)}, {"alignment", unet_alignment(o)}, {"remainder", unet_remainder(o)}};
  j["normalization"]["formula"] = "x' = (x - offset) / scale";
  return j;
}

CheckpointMeta arch_from_json(const std::string& path) {
  if (!fs::is_regular_file(path)) throw Error(path + ": no such architecture file (model.json from tessera export)");
  std::ifstream in(path);
  CheckpointMeta m = parse_arch(path, in);
  try {
    m.model.validate();
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  const auto channels = static_cast<size_t>(m.model.in_channels);
  if (m.norm.offset.size() != channels || m.norm.scale.size() != channels)
    throw Error(path + ": normalization.offset/scale need " + std::to_string(channels) + " values (in_channels)");
  if (m.class_names.size() != static_cast<size_t>(m.model.classes))
    throw Error(path + ": class_names has " + std::to_string(m.class_names.size()) + " names but model.classes is " +
                std::to_string(m.model.classes));
  return m;
}

std::vector<std::pair<std::string, torch::Tensor>> named_state(UNet& net) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : net->named_parameters()) out.emplace_back(p.key(), p.value());
  for (const auto& b : net->named_buffers()) out.emplace_back(b.key(), b.value());
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> read_weights(const std::string& path) {
  if (!fs::is_regular_file(path)) throw Error(path + ": no such weights file");
  const std::string hint = "; save a dict of tensors with torch.save(net.state_dict(), path)";
  c10::IValue value;
  try {
    value = unpickle(path, hint);
  } catch (const c10::Error& e) {
    const std::string msg = first_line(e.what_without_backtrace());
    if (msg.find("zip archive") != std::string::npos)
      throw Error(path + ": not a readable torch.save file (truncated, or the legacy non-zip format)");
    throw Error(path + ": cannot read weights (" + msg + ")" + hint);
  }
  if (!value.isGenericDict()) throw Error(path + ": holds a " + value.tagKind() + ", not a dict of tensors" + hint);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& e : value.toGenericDict()) {
    if (!e.key().isString()) throw Error(path + ": a key is a " + e.key().tagKind() + ", not a parameter name");
    if (!e.value().isTensor())
      throw Error(path + ": '" + e.key().toStringRef() + "' is a " + e.value().tagKind() + ", not a tensor");
    out.emplace_back(e.key().toStringRef(), e.value().toTensor());
  }
  return out;
}

}  // namespace tessera::engine::exchange
