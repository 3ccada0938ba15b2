// Medical Segmentation Decathlon / nnU-Net dataset folders (cli/msd_dataset.hpp): both
// flavours of dataset.json read, every refusal one line naming dataset.json and the problem,
// the validation / k-fold split, the inference jobs' names, and data.dataset in a config.
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tessera/engine/config_file.hpp"
#include "tessera/engine/msd_dataset.hpp"
#include "tessera/engine/run_config.hpp"
#include "tessera/core/error.hpp"

namespace tessera::cli {

using namespace ::tessera::engine;  // the engine library (engine/): transitional, until the command is thin
namespace {

namespace fs = std::filesystem;

class MsdFolder {
 public:
  MsdFolder() : root_(fs::temp_directory_path() / ("tessera_msd_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++))) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~MsdFolder() { fs::remove_all(root_); }
  std::string path() const { return root_.string(); }
  std::string json_path() const { return (root_ / "dataset.json").string(); }
  void write(const std::string& rel, const std::string& text = "x") const {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  std::string at(const std::string& rel) const { return (root_ / rel).lexically_normal().string(); }

 private:
  static inline int counter_ = 0;
  fs::path root_;
};

// A v1 dataset with cases b, a (listed out of order) and one test image.
void write_v1(const MsdFolder& f, const std::string& labels = R"({"0": "background", "1": "liver", "2": "kidney"})",
              const std::string& modality = R"({"0": "CT"})", const std::string& extra = "") {
  for (const char* id : {"liver_b", "liver_a"}) {
    f.write(std::string("imagesTr/") + id + ".nii.gz");
    f.write(std::string("labelsTr/") + id + ".nii.gz");
  }
  f.write("imagesTs/liver_t.nii.gz");
  f.write("dataset.json", R"({"name": "Liver", "modality": )" + modality + R"(, "labels": )" + labels + extra + R"(,
    "training": [{"image": "./imagesTr/liver_b.nii.gz", "label": "./labelsTr/liver_b.nii.gz"},
                 {"image": "./imagesTr/liver_a.nii.gz", "label": "./labelsTr/liver_a.nii.gz"}],
    "test": ["./imagesTs/liver_t.nii.gz"]})");
}

// A v2 dataset with cases c1, c0 and test images t0, t1.
void write_v2(const MsdFolder& f, const std::string& labels = R"({"background": 0, "liver": 1})",
              const std::string& channels = R"({"0": "CT"})", int num_training = 2) {
  for (const char* id : {"c1", "c0"}) {
    f.write(std::string("imagesTr/") + id + "_0000.nii.gz");
    f.write(std::string("labelsTr/") + id + ".nii.gz");
  }
  f.write("imagesTs/t1_0000.nii.gz");
  f.write("imagesTs/t0_0000.nii.gz");
  f.write("dataset.json", R"({"channel_names": )" + channels + R"(, "labels": )" + labels +
                              R"(, "numTraining": )" + std::to_string(num_training) + R"(, "file_ending": ".nii.gz"})");
}

// The error a reader throws, checked to be one line starting with FOLDER/dataset.json.
std::string refusal(const MsdFolder& f) {
  try {
    read_msd_dataset(f.path());
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind(f.json_path() + ": ", 0), 0u) << msg;
    return msg;
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(MsdDataset, ReadsADecathlonV1Folder) {
  MsdFolder f;
  write_v1(f);
  const MsdDataset d = read_msd_dataset(f.path());
  EXPECT_EQ(d.flavour, "msd");
  EXPECT_EQ(d.name, "Liver");
  ASSERT_EQ(d.cases.size(), 2u);
  EXPECT_EQ(d.cases[0].id, "liver_a");  // sorted by id
  EXPECT_EQ(d.cases[0].image, f.at("imagesTr/liver_a.nii.gz"));
  EXPECT_EQ(d.cases[0].label, f.at("labelsTr/liver_a.nii.gz"));
  EXPECT_EQ(d.cases[1].id, "liver_b");
  ASSERT_EQ(d.test.size(), 1u);
  EXPECT_EQ(d.test[0].id, "liver_t");
  EXPECT_EQ(d.test[0].image, f.at("imagesTs/liver_t.nii.gz"));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"background", "liver", "kidney"}));
  EXPECT_EQ(d.channel, "CT");
  EXPECT_EQ(d.file_ending, ".nii.gz");
}

TEST(MsdDataset, ReadsAnNnUnetV2Folder) {
  MsdFolder f;
  write_v2(f, R"({"liver": 1, "background": 0})");  // ids, not key order, give the class order
  const MsdDataset d = read_msd_dataset(f.path());
  EXPECT_EQ(d.flavour, "nnunet");
  ASSERT_EQ(d.cases.size(), 2u);
  EXPECT_EQ(d.cases[0].id, "c0");
  EXPECT_EQ(d.cases[0].image, f.at("imagesTr/c0_0000.nii.gz"));
  EXPECT_EQ(d.cases[0].label, f.at("labelsTr/c0.nii.gz"));
  EXPECT_EQ(d.cases[1].id, "c1");
  ASSERT_EQ(d.test.size(), 2u);
  EXPECT_EQ(d.test[0].id, "t0");
  EXPECT_EQ(d.test[1].image, f.at("imagesTs/t1_0000.nii.gz"));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"background", "liver"}));
  EXPECT_EQ(d.channel, "CT");
}

TEST(MsdDataset, RefusesAMissingOrBrokenDatasetJson) {
  MsdFolder f;
  EXPECT_NE(refusal(f).find("not found"), std::string::npos);
  f.write("dataset.json", "{\"training\": [");
  EXPECT_NE(refusal(f).find("bad JSON"), std::string::npos);
  f.write("dataset.json", R"({"labels": {"0": "background", "1": "liver"}})");
  EXPECT_NE(refusal(f).find("neither"), std::string::npos);
}

TEST(MsdDataset, RefusesAListedFileThatDoesNotExistNamingIt) {
  {
    MsdFolder f;
    write_v1(f);
    fs::remove(f.at("imagesTr/liver_b.nii.gz"));
    EXPECT_NE(refusal(f).find(f.at("imagesTr/liver_b.nii.gz") + " does not exist"), std::string::npos);
  }
  {
    MsdFolder f;
    write_v1(f);
    fs::remove(f.at("labelsTr/liver_a.nii.gz"));
    EXPECT_NE(refusal(f).find("training label " + f.at("labelsTr/liver_a.nii.gz")), std::string::npos);
  }
  {
    MsdFolder f;
    write_v1(f);
    fs::remove(f.at("imagesTs/liver_t.nii.gz"));
    EXPECT_NE(refusal(f).find("test image " + f.at("imagesTs/liver_t.nii.gz")), std::string::npos);
  }
  {
    MsdFolder f;
    write_v2(f);
    fs::remove(f.at("imagesTr/c1_0000.nii.gz"));
    EXPECT_NE(refusal(f).find(f.at("imagesTr/c1_0000.nii.gz") + " (of"), std::string::npos);
  }
}

TEST(MsdDataset, RefusesLabelIdsThatAreNotZeroToNMinusOne) {
  {
    MsdFolder f;
    write_v1(f, R"({"0": "background", "1": "liver", "3": "tumour"})");
    const std::string msg = refusal(f);
    EXPECT_NE(msg.find("id 2 is missing"), std::string::npos) << msg;
  }
  {
    MsdFolder f;
    write_v2(f, R"({"liver": 1, "tumour": 2})");
    EXPECT_NE(refusal(f).find("id 0 is missing"), std::string::npos);
  }
  {
    MsdFolder f;
    write_v2(f, R"({"background": 0, "liver": 1, "whole": [1, 2]})");
    EXPECT_NE(refusal(f).find("'whole' is a region"), std::string::npos);
  }
}

TEST(MsdDataset, RefusesMoreThanOneChannelNamingThem) {
  {
    MsdFolder f;
    write_v1(f, R"({"0": "background", "1": "prostate"})", R"({"0": "T2", "1": "ADC"})");
    const std::string msg = refusal(f);
    EXPECT_NE(msg.find("2 channels"), std::string::npos) << msg;
    EXPECT_NE(msg.find("0: T2, 1: ADC"), std::string::npos) << msg;
  }
  {
    MsdFolder f;
    write_v2(f, R"({"background": 0, "liver": 1})", R"({"0": "T1", "1": "T2", "2": "FLAIR"})");
    EXPECT_NE(refusal(f).find("3 channels in channel_names (0: T1, 1: T2, 2: FLAIR)"), std::string::npos);
  }
}

TEST(MsdDataset, RefusesANumTrainingThatDisagreesWithTheFiles) {
  {
    MsdFolder f;
    write_v2(f, R"({"background": 0, "liver": 1})", R"({"0": "CT"})", 3);
    const std::string msg = refusal(f);
    EXPECT_NE(msg.find("numTraining is 3 but there are 2"), std::string::npos) << msg;
  }
  {
    MsdFolder f;
    write_v1(f, R"({"0": "background", "1": "liver"})", R"({"0": "CT"})", R"(, "numTraining": 5)");
    EXPECT_NE(refusal(f).find("numTraining is 5 but there are 2"), std::string::npos);
  }
}

// Five cases e0 … e4 (listed shuffled): fold K of N validates on ids K, K+N, ….
MsdDataset five_cases() {
  MsdDataset d;
  d.folder = "ds";
  for (const char* id : {"e3", "e0", "e4", "e1", "e2"}) d.cases.push_back({id, "", ""});
  std::sort(d.cases.begin(), d.cases.end(), [](const MsdCase& a, const MsdCase& b) { return a.id < b.id; });
  return d;
}

std::vector<std::string> ids(const std::vector<MsdCase>& cases) {
  std::vector<std::string> out;
  for (const MsdCase& c : cases) out.push_back(c.id);
  return out;
}

TEST(MsdSplit, FoldKOfNIsEveryNthCaseFromTheKth) {
  const MsdDataset d = five_cases();
  MsdSplit s = split_msd_cases(d, {}, 1, 2);
  EXPECT_EQ(ids(s.validation), (std::vector<std::string>{"e1", "e3"}));
  EXPECT_EQ(ids(s.training), (std::vector<std::string>{"e0", "e2", "e4"}));
  s = split_msd_cases(d, {}, 2, 3);
  EXPECT_EQ(ids(s.validation), (std::vector<std::string>{"e2"}));
  // The folds of one N cover every case exactly once.
  std::vector<std::string> all;
  for (int k = 0; k < 5; ++k) {
    const MsdSplit one = split_msd_cases(d, {}, k, 5);
    ASSERT_EQ(one.validation.size(), 1u);
    all.push_back(one.validation[0].id);
  }
  EXPECT_EQ(all, ids(d.cases));
}

TEST(MsdSplit, AValidationListHoldsThoseCasesOut) {
  const MsdDataset d = five_cases();
  const MsdSplit s = split_msd_cases(d, {"e4", "e0"}, 0, 0);
  EXPECT_EQ(ids(s.validation), (std::vector<std::string>{"e0", "e4"}));
  EXPECT_EQ(ids(s.training), (std::vector<std::string>{"e1", "e2", "e3"}));
  EXPECT_EQ(split_msd_cases(d, {}, 0, 0).training.size(), 5u);  // neither: everything trains
}

TEST(MsdSplit, RefusesUnknownCasesBadFoldsAndNothingLeftToTrain) {
  const MsdDataset d = five_cases();
  auto message = [&](std::vector<std::string> v, int fold, int folds) -> std::string {
    try {
      split_msd_cases(d, v, fold, folds);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message({"e9"}, 0, 0).find("case 'e9' is not among"), std::string::npos);
  EXPECT_NE(message({}, 2, 2).find("data.fold: 2 is outside [0, 1]"), std::string::npos);
  EXPECT_NE(message({}, 1, 0).find("needs data.folds"), std::string::npos);
  EXPECT_NE(message({}, 0, 6).find("6 folds but"), std::string::npos);
  EXPECT_NE(message({"e1"}, 0, 2).find("not both"), std::string::npos);
  EXPECT_NE(message({"e0", "e1", "e2", "e3", "e4"}, 0, 0).find("none is left to train on"), std::string::npos);
}

TEST(MsdInference, TestImagesMapToCaseNamesWithoutTheChannelSuffix) {
  MsdFolder f;
  write_v2(f);
  const auto jobs = msd_inference_jobs(f.path(), "/out");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].first, f.at("imagesTs/t0_0000.nii.gz"));
  EXPECT_EQ(jobs[0].second, "/out/t0.nii.gz");
  EXPECT_EQ(jobs[1].second, "/out/t1.nii.gz");
  MsdFolder v1;
  write_v1(v1);
  const auto one = msd_inference_jobs(v1.path(), "/out");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].second, "/out/liver_t.nii.gz");
  fs::remove_all(v1.at("imagesTs"));
  v1.write("dataset.json", R"({"training": [{"image": "./imagesTr/liver_a.nii.gz", "label": "./labelsTr/liver_a.nii.gz"}],
                               "labels": {"0": "background", "1": "liver"}})");
  EXPECT_THROW(msd_inference_jobs(v1.path(), "/out"), Error);
}

// ---- data.dataset in a training config ------------------------------------------------

std::string config_error(const std::string& yaml) {
  try {
    read_run_config(ConfigFile::parse(yaml, "t.yaml"));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(DatasetConfig, ReadsAndRoundTripsThroughTheResolvedConfig) {
  const RunConfig c = read_run_config(ConfigFile::parse("data: {dataset: msd, validation: [a, b]}\n", "t.yaml"));
  EXPECT_EQ(c.data.dataset, "msd");
  EXPECT_EQ(c.data.validation, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(c.classes_given);
  const std::string yaml = resolved_config_yaml(c);
  EXPECT_EQ(resolved_config_yaml(read_run_config(ConfigFile::parse(yaml, "config.yaml"))), yaml);
  const RunConfig k = read_run_config(ConfigFile::parse("data: {dataset: msd, fold: 2, folds: 5}\n", "t.yaml"));
  EXPECT_EQ(k.data.fold, 2);
  EXPECT_EQ(k.data.folds, 5);
}

TEST(DatasetConfig, RefusesDatasetWithPairsHoldoutOrBadFolds) {
  EXPECT_NE(config_error("data: {dataset: msd, pairs: [{image: a.tif, labels: b.tif}]}\n").find("give one of them"),
            std::string::npos);
  EXPECT_NE(config_error("data: {dataset: msd, holdout: {fraction: 0.2}}\n").find("data.holdout is for data.pairs"),
            std::string::npos);
  EXPECT_NE(config_error("data: {dataset: msd, validation: [a], folds: 2}\n").find("not both"), std::string::npos);
  EXPECT_NE(config_error("data: {dataset: msd, fold: 3, folds: 3}\n").find("data.fold 3 of data.folds 3"), std::string::npos);
  EXPECT_NE(config_error("data: {pairs: [{image: a.tif, labels: b.tif}], validation: [a]}\n").find("need data.dataset"),
            std::string::npos);
  const std::string one_line = config_error("data: {dataset: msd, pairs: [{image: a.tif, labels: b.tif}]}\n");
  EXPECT_EQ(one_line.find('\n'), std::string::npos);
  EXPECT_EQ(one_line.rfind("t.yaml:1", 0), 0u) << one_line;
}

TEST(DatasetConfig, ClassNamesComeFromTheDatasetUnlessGivenAndThenMustAgreeInCount) {
  const std::vector<std::string> names{"background", "liver", "kidney"};
  RunConfig c = read_run_config(ConfigFile::parse("data: {dataset: msd}\n", "t.yaml"));
  take_dataset_classes(c, names, "t.yaml");
  EXPECT_EQ(c.data.class_names, names);
  EXPECT_EQ(c.model.options.classes, 3);
  RunConfig given = read_run_config(ConfigFile::parse("data: {dataset: msd, class_names: [bg, a, b]}\n", "t.yaml"));
  take_dataset_classes(given, names, "t.yaml");
  EXPECT_EQ(given.data.class_names, (std::vector<std::string>{"bg", "a", "b"}));
  RunConfig wrong = read_run_config(ConfigFile::parse("data: {dataset: msd, class_names: [bg, a]}\n", "t.yaml"));
  try {
    take_dataset_classes(wrong, names, "t.yaml");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.class_names has 2 names but the dataset has 3 labels"), std::string::npos);
  }
}

}  // namespace
}  // namespace tessera::cli
