#include "tessera/engine/msd_dataset.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"

namespace tessera::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kChannelSuffix = "_0000";  // nnU-Net v2: the first (only) channel

// Every message starts with the file it is about.
struct Where {
  std::string json_path;
  [[noreturn]] void fail(const std::string& problem) const { throw Error(json_path + ": " + problem); }
};

// ".nii.gz" for x.nii.gz, else the last extension (".nrrd", ".mha").
std::string ending_of(const std::string& file_name) {
  for (const char* compound : {".nii.gz", ".seg.nrrd"})
    if (file_name.size() > std::string(compound).size() && file_name.ends_with(compound)) return compound;
  return fs::path(file_name).extension().string();
}

std::string strip_suffix(const std::string& s, const std::string& suffix) {
  return s.ends_with(suffix) ? s.substr(0, s.size() - suffix.size()) : s;
}

// "./imagesTr/x.nii.gz" → FOLDER/imagesTr/x.nii.gz, which must exist.
std::string existing(const Where& w, const std::string& folder, const std::string& listed, const std::string& what) {
  const fs::path p = fs::path(listed).is_absolute() ? fs::path(listed) : (fs::path(folder) / listed).lexically_normal();
  if (!fs::is_regular_file(p)) w.fail(what + " " + p.string() + " does not exist");
  return p.string();
}

// "0: T2, 1: ADC"
std::string describe_map(const json& m) {
  std::string s;
  for (const auto& [k, v] : m.items()) s += (s.empty() ? "" : ", ") + k + ": " + (v.is_string() ? v.get<std::string>() : v.dump());
  return s;
}

// Label ids must be 0 … N-1; the names in id order.
std::vector<std::string> dense_names(const Where& w, const std::map<int, std::string>& by_id) {
  std::vector<std::string> names;
  for (const auto& [id, name] : by_id) {
    if (id != static_cast<int>(names.size()))
      w.fail("labels: ids must be 0.." + std::to_string(by_id.size() - 1) + ", but id " + std::to_string(names.size()) +
             " is missing (ids given: " + [&] {
               std::string ids;
               for (const auto& e : by_id) ids += (ids.empty() ? "" : ", ") + std::to_string(e.first);
               return ids;
             }() + ")");
    names.push_back(name);
  }
  if (names.size() < 2) w.fail("labels: at least two classes (background and one more), found " + std::to_string(names.size()));
  return names;
}

int parse_id(const Where& w, const std::string& key, const std::string& text) {
  try {
    size_t used = 0;
    const int id = std::stoi(text, &used);
    if (used == text.size() && id >= 0) return id;
  } catch (const std::exception&) {
  }
  w.fail(key + ": '" + text + "' is not a label id (a non-negative integer)");
}

// {"0": "CT"} (v1 modality) or {"0": "CT"} (v2 channel_names): one channel only.
std::string one_channel(const Where& w, const json& j, const char* key, bool required) {
  if (!j.contains(key)) {
    if (required) w.fail(std::string(key) + ": missing (the image channels, e.g. {\"0\": \"CT\"})");
    return "";
  }
  const json& m = j.at(key);
  if (!m.is_object() || m.empty()) w.fail(std::string(key) + ": expected an object like {\"0\": \"CT\"}");
  if (m.size() > 1)
    w.fail(std::to_string(m.size()) + " channels in " + key + " (" + describe_map(m) + "); only one channel is supported");
  const json& v = m.begin().value();
  return v.is_string() ? v.get<std::string>() : v.dump();
}

void check_num_training(const Where& w, const json& j, size_t found, const std::string& of_what) {
  if (!j.contains("numTraining")) return;
  const json& n = j.at("numTraining");
  if (!n.is_number_integer()) w.fail("numTraining: expected an integer, got " + n.dump());
  if (n.get<int64_t>() != static_cast<int64_t>(found))
    w.fail("numTraining is " + n.dump() + " but there are " + std::to_string(found) + " " + of_what);
}

// MSD v1: the files are listed.
void read_v1(const Where& w, const json& j, MsdDataset& d) {
  const json& training = j.at("training");
  if (!training.is_array()) w.fail("training: expected a list of {\"image\", \"label\"}");
  for (const json& e : training) {
    if (!e.is_object() || !e.contains("image") || !e.contains("label") || !e["image"].is_string() || !e["label"].is_string())
      w.fail("training: every entry needs \"image\" and \"label\" paths, got " + e.dump());
    const std::string image = existing(w, d.folder, e["image"], "training image");
    const std::string label = existing(w, d.folder, e["label"], "training label");
    const std::string name = fs::path(image).filename().string();
    if (d.file_ending.empty()) d.file_ending = ending_of(name);
    d.cases.push_back({strip_suffix(name, ending_of(name)), image, label});
  }
  check_num_training(w, j, d.cases.size(), "entries in training");
  if (j.contains("test")) {
    if (!j["test"].is_array()) w.fail("test: expected a list of image paths");
    for (const json& e : j["test"]) {
      // Some MSD conversions list {"image": ...} objects instead of plain paths.
      const json& p = e.is_object() && e.contains("image") ? e["image"] : e;
      if (!p.is_string()) w.fail("test: expected image paths, got " + e.dump());
      const std::string image = existing(w, d.folder, p, "test image");
      const std::string name = fs::path(image).filename().string();
      d.test.push_back({strip_suffix(name, ending_of(name)), image});
    }
  }
  if (!j.contains("labels") || !j["labels"].is_object()) w.fail("labels: missing (e.g. {\"0\": \"background\", \"1\": \"liver\"})");
  std::map<int, std::string> by_id;
  for (const auto& [key, v] : j["labels"].items())
    by_id[parse_id(w, "labels", key)] = v.is_string() ? v.get<std::string>() : v.dump();
  d.class_names = dense_names(w, by_id);
  d.channel = one_channel(w, j, "modality", false);
}

// nnU-Net v2: the files are found by name in imagesTr / labelsTr / imagesTs.
void read_v2(const Where& w, const json& j, MsdDataset& d) {
  d.channel = one_channel(w, j, "channel_names", true);
  if (!j.contains("file_ending") || !j["file_ending"].is_string()) w.fail("file_ending: missing (e.g. \".nii.gz\")");
  d.file_ending = j["file_ending"];
  const fs::path folder(d.folder);
  const fs::path labels_dir = folder / "labelsTr";
  if (!fs::is_directory(labels_dir)) w.fail("labelsTr: folder " + labels_dir.string() + " does not exist");
  for (const auto& e : fs::directory_iterator(labels_dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !name.ends_with(d.file_ending) || name.starts_with(".")) continue;
    const std::string id = strip_suffix(name, d.file_ending);
    const std::string image = (folder / "imagesTr" / (id + kChannelSuffix + d.file_ending)).string();
    if (!fs::is_regular_file(image)) w.fail("training image " + image + " (of " + e.path().string() + ") does not exist");
    d.cases.push_back({id, image, e.path().string()});
  }
  check_num_training(w, j, d.cases.size(), "label files in " + labels_dir.string());
  const fs::path test_dir = folder / "imagesTs";
  if (fs::is_directory(test_dir))
    for (const auto& e : fs::directory_iterator(test_dir)) {
      const std::string name = e.path().filename().string();
      const std::string tail = std::string(kChannelSuffix) + d.file_ending;
      if (e.is_regular_file() && name.ends_with(tail) && !name.starts_with("."))
        d.test.push_back({strip_suffix(name, tail), e.path().string()});
    }
  if (!j.contains("labels") || !j["labels"].is_object()) w.fail("labels: missing (e.g. {\"background\": 0, \"liver\": 1})");
  std::map<int, std::string> by_id;
  for (const auto& [name, v] : j["labels"].items()) {
    if (v.is_array()) w.fail("labels: '" + name + "' is a region (a list of ids); region-based labels are not supported");
    if (!v.is_number_integer() || v.get<int64_t>() < 0) w.fail("labels: '" + name + "': expected a label id, got " + v.dump());
    const int id = v.get<int>();
    if (by_id.count(id)) w.fail("labels: id " + std::to_string(id) + " is both '" + by_id[id] + "' and '" + name + "'");
    by_id[id] = name;
  }
  d.class_names = dense_names(w, by_id);
}

json load_json(const Where& w, const std::string& path) {
  if (!fs::is_regular_file(path)) w.fail("not found (an MSD / nnU-Net dataset folder holds dataset.json)");
  std::ifstream in(path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    w.fail(std::string("bad JSON: ") + e.what());
  }
}

}  // namespace

MsdDataset read_msd_dataset(const std::string& folder) {
  const Where w{(fs::path(folder) / "dataset.json").string()};
  const json j = load_json(w, w.json_path);
  if (!j.is_object()) w.fail("expected a JSON object");
  MsdDataset d;
  d.folder = folder;
  if (j.contains("name") && j["name"].is_string()) d.name = j["name"];
  try {
    if (j.contains("channel_names")) {
      d.flavour = "nnunet";
      read_v2(w, j, d);
    } else if (j.contains("training")) {
      d.flavour = "msd";
      read_v1(w, j, d);
    } else {
      w.fail("neither \"training\" (Medical Segmentation Decathlon) nor \"channel_names\" (nnU-Net v2)");
    }
  } catch (const json::exception& e) {  // a value of the wrong type somewhere
    w.fail(std::string("unexpected value: ") + e.what());
  }
  if (d.cases.empty()) w.fail("no training cases");
  auto by_id = [](const auto& a, const auto& b) { return a.id < b.id; };
  std::sort(d.cases.begin(), d.cases.end(), by_id);
  std::sort(d.test.begin(), d.test.end(), by_id);
  for (size_t i = 1; i < d.cases.size(); ++i)
    if (d.cases[i].id == d.cases[i - 1].id) w.fail("case '" + d.cases[i].id + "' is listed twice");
  return d;
}

MsdSplit split_msd_cases(const MsdDataset& d, const std::vector<std::string>& validation, int fold, int folds) {
  const std::string json_path = (fs::path(d.folder) / "dataset.json").string();
  const int n = static_cast<int>(d.cases.size());
  if (!validation.empty() && folds > 0) throw Error("data.validation and data.folds: give one of them, not both");
  if (folds < 0) throw Error("data.folds: " + std::to_string(folds) + " must be positive (or 0: no folds)");
  if (folds == 0 && fold != 0) throw Error("data.fold: " + std::to_string(fold) + " needs data.folds");
  if (folds > 0 && (fold < 0 || fold >= folds))
    throw Error("data.fold: " + std::to_string(fold) + " is outside [0, " + std::to_string(folds - 1) + "] (data.folds " +
                std::to_string(folds) + ")");
  if (folds > n)
    throw Error("data.folds: " + std::to_string(folds) + " folds but " + json_path + " has " + std::to_string(n) + " cases");
  std::set<std::string> held(validation.begin(), validation.end());
  for (const std::string& id : held)
    if (std::none_of(d.cases.begin(), d.cases.end(), [&](const MsdCase& c) { return c.id == id; }))
      throw Error("data.validation: case '" + id + "' is not among the training cases of " + json_path);
  MsdSplit s;
  for (int i = 0; i < n; ++i) {
    const MsdCase& c = d.cases[size_t(i)];
    const bool validates = folds > 0 ? i % folds == fold : held.count(c.id) > 0;
    (validates ? s.validation : s.training).push_back(c);
  }
  if (s.training.empty()) throw Error("data.validation: every case of " + json_path + " validates; none is left to train on");
  return s;
}

std::string msd_prediction_file(const std::string& id, const std::string& image) {
  return id + ending_of(fs::path(image).filename().string());
}

std::vector<std::pair<std::string, std::string>> msd_inference_jobs(const std::string& folder, const std::string& out_dir) {
  const MsdDataset d = read_msd_dataset(folder);
  if (d.test.empty())
    throw Error((fs::path(folder) / "dataset.json").string() + ": no test images (" +
                (d.flavour == "msd" ? "\"test\" is empty" : "imagesTs/*_0000" + d.file_ending + " found none") + ")");
  std::vector<std::pair<std::string, std::string>> jobs;
  for (const MsdTestImage& t : d.test) jobs.emplace_back(t.image, (fs::path(out_dir) / msd_prediction_file(t.id, t.image)).string());
  return jobs;
}

}  // namespace tessera::engine
