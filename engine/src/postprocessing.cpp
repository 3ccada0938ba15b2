// nnU-Net's post-processing decided on validation predictions (see
// tessera/engine/postprocessing.hpp).
#include "tessera/engine/postprocessing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "tessera/core/error.hpp"
#include "tessera/core/metrics.hpp"
#include "tessera/io/components.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::engine {
namespace {

namespace fs = std::filesystem;

struct Volume {
  Index extent;
  std::vector<uint8_t> labels;
};

Volume read_labels(const std::string& path) {
  const auto image = io::open_image(path);
  const ImageInfo& info = image->info();
  if (info.extent.size() != 3 || info.channels != 1) throw Error(path + ": not a one-channel label volume");
  const Block<float> block = image->read(Box{Index{0, 0, 0}, info.extent});
  Volume v{info.extent, std::vector<uint8_t>(block.data.size())};
  std::transform(block.data.begin(), block.data.end(), v.labels.begin(),
                 [](float x) { return x >= 0 && x < 255 ? static_cast<uint8_t>(x) : uint8_t{255}; });
  return v;
}

// Dice of class `c` (core's ConfusionCounts; 255 in the truth counts nowhere); NaN when the
// class is absent from both.
double dice(const std::vector<uint8_t>& pred, const std::vector<uint8_t>& truth, int classes, int c) {
  ConfusionCounts counts(classes);
  counts.add<uint8_t>(pred.data(), truth.data(), static_cast<int64_t>(pred.size()), uint8_t{255});
  return counts.scores(c).dice;
}

bool is_volume_file(const fs::path& p) {
  const std::string name = p.filename().string();
  for (const char* ending : {".nii.gz", ".nii", ".nrrd", ".mha", ".mhd"})
    if (name.size() > std::string(ending).size() && name.ends_with(ending)) return true;
  return false;
}

}  // namespace

void PostprocessOptions::validate() const {
  if (run.empty()) throw Error("--run: the run directory is required");
  if (pred.empty()) throw Error("--pred: the folder of validation predictions is required");
  if (truth.empty()) throw Error("--truth: the folder of true labels is required");
  if (classes < 0 || classes > 255) throw Error("--classes " + std::to_string(classes) + ": expected 0..255");
}

std::vector<int> PostprocessingDecision::keep_largest() const {
  std::vector<int> out;
  for (const auto& c : classes)
    if (c.keep_largest) out.push_back(c.label);
  return out;
}

nlohmann::json PostprocessingDecision::to_json() const {
  nlohmann::json j{{"rule", "keep the largest connected component of a class where it raises its mean validation Dice"},
                   {"cases", cases},
                   {"classes", nlohmann::json::array()}};
  for (const auto& c : classes)
    j["classes"].push_back({{"label", c.label},
                            {"cases", c.cases},
                            {"dice_without", c.dice_without},
                            {"dice_with", c.dice_with},
                            {"keep_largest", c.keep_largest}});
  return j;
}

PostprocessingDecision PostprocessingDecision::from_json(const nlohmann::json& j, const std::string& path) {
  PostprocessingDecision d;
  try {
    d.cases = j.at("cases").get<std::vector<std::string>>();
    for (const auto& c : j.at("classes"))
      d.classes.push_back({c.at("label").get<int>(), c.at("cases").get<int>(), c.at("dice_without").get<double>(),
                           c.at("dice_with").get<double>(), c.at("keep_largest").get<bool>()});
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not a post-processing decision: " + e.what());
  }
  for (const auto& c : d.classes)
    if (c.label < 1 || c.label > 254) throw Error(path + ": class label " + std::to_string(c.label) + " out of 1..254");
  return d;
}

PostprocessingDecision decide_postprocessing(const std::vector<std::string>& pred, const std::vector<std::string>& truth,
                                             int classes) {
  TESSERA_CHECK(pred.size() == truth.size());
  std::vector<Volume> p, t;
  int seen = 0;
  for (size_t i = 0; i < pred.size(); ++i) {
    p.push_back(read_labels(pred[i]));
    t.push_back(read_labels(truth[i]));
    if (p.back().extent != t.back().extent)
      throw Error(pred[i] + ": extent " + to_string(p.back().extent) + " differs from " + truth[i] + "'s " +
                  to_string(t.back().extent));
    for (const auto* v : {&p.back(), &t.back()})
      for (uint8_t x : v->labels)
        if (x != 255) seen = std::max(seen, int(x) + 1);
  }
  PostprocessingDecision d;
  for (const auto& f : pred) d.cases.push_back(fs::path(f).filename().string());
  const int n = classes > 0 ? classes : seen;
  for (int c = 1; c < n; ++c) {
    ClassPostprocessing r{c};
    double without = 0, with = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      const double a = dice(p[i].labels, t[i].labels, n, c);
      if (std::isnan(a)) continue;
      std::vector<uint8_t> kept = p[i].labels;
      io::keep_largest_component(kept, p[i].extent, uint8_t(c));
      without += a, with += dice(kept, t[i].labels, n, c), ++r.cases;
    }
    if (r.cases > 0) r.dice_without = without / r.cases, r.dice_with = with / r.cases;
    r.keep_largest = r.cases > 0 && r.dice_with > r.dice_without;
    d.classes.push_back(r);
  }
  return d;
}

std::string describe_postprocessing(const PostprocessingDecision& d, const std::vector<std::string>& names) {
  const auto name = [&](int label) { return size_t(label) < names.size() ? names[size_t(label)] : std::to_string(label); };
  size_t width = 5;  // "class"
  for (const auto& c : d.classes) width = std::max(width, name(c.label).size());
  std::string s = fmt::format("{:>{}}  cases  Dice without  Dice with  largest component\n", "class", width);
  for (const auto& c : d.classes)
    s += fmt::format("{:>{}}  {:>5}  {:>12.4f}  {:>9.4f}  {}\n", name(c.label), width, c.cases, c.dice_without, c.dice_with,
                     c.keep_largest ? "kept" : "not kept");
  return s;
}

std::string postprocessing_path(const std::string& run_dir) { return (fs::path(run_dir) / "postprocessing.json").string(); }

std::string run_of_checkpoint(const std::string& checkpoint) {
  const fs::path dir = fs::path(checkpoint).parent_path();
  if (dir.filename() != "checkpoints") return "";
  return dir.parent_path().empty() ? "." : dir.parent_path().string();
}

std::optional<PostprocessingDecision> read_postprocessing(const std::string& run_dir) {
  const std::string path = postprocessing_path(run_dir);
  if (run_dir.empty() || !fs::exists(path)) return std::nullopt;
  std::ifstream in(path);
  try {
    return PostprocessingDecision::from_json(nlohmann::json::parse(in), path);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not JSON: " + e.what());
  }
}

void run_postprocess(const PostprocessOptions& o) {
  o.validate();
  if (!fs::is_directory(o.run)) throw Error("--run " + o.run + ": not a directory");
  if (!fs::is_directory(o.pred)) throw Error("--pred " + o.pred + ": not a folder");
  std::vector<std::string> pred, truth;
  for (const auto& e : fs::directory_iterator(o.pred))
    if (e.is_regular_file() && is_volume_file(e.path())) pred.push_back(e.path().string());
  std::sort(pred.begin(), pred.end());
  if (pred.empty()) throw Error("--pred " + o.pred + ": no label volumes");
  for (const auto& f : pred) {
    truth.push_back((fs::path(o.truth) / fs::path(f).filename()).string());
    if (!fs::exists(truth.back())) throw Error("--truth " + o.truth + ": no " + fs::path(f).filename().string());
  }
  const PostprocessingDecision d = decide_postprocessing(pred, truth, o.classes);
  std::printf("post-processing on %zu validation cases: keep the largest component where it raises the class's mean Dice\n",
              pred.size());
  std::printf("%s", describe_postprocessing(d).c_str());
  write_file_atomically(postprocessing_path(o.run), {d.to_json().dump(2), "\n"});
  std::printf("%s\n", postprocessing_path(o.run).c_str());
}

}  // namespace tessera::engine
