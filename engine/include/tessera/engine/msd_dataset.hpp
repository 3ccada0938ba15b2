#pragma once
// A Medical Segmentation Decathlon / nnU-Net dataset folder as a data source: `train` takes
// its cases (data.dataset), `infer` its test images (a folder holding dataset.json).
// Two flavours of FOLDER/dataset.json, told apart by their keys:
//   MSD v1:     "training": [{"image": "./imagesTr/x.nii.gz", "label": "./labelsTr/x.nii.gz"}],
//               "test": ["./imagesTs/y.nii.gz"], "labels": {"0": "background", "1": "liver"},
//               "modality": {"0": "CT"}
//   nnU-Net v2: "channel_names": {"0": "CT"}, "labels": {"background": 0, "liver": 1},
//               "numTraining": N, "file_ending": ".nii.gz"; a case is labelsTr/<case><ending>,
//               its image imagesTr/<case>_0000<ending>, test images imagesTs/<case>_0000<ending>.
// One channel only. Every error is one line "<folder>/dataset.json: <problem>". Torch-free.
#include <string>
#include <utility>
#include <vector>

namespace tessera::engine {

/// One labelled case; paths are FOLDER-joined and exist.
struct MsdCase {
  std::string id;  ///< "liver_003": the file name without its ending (and without _0000 in v2)
  std::string image, label;
};

/// One test image (no label).
struct MsdTestImage {
  std::string id, image;
};

struct MsdDataset {
  std::string folder;
  std::string flavour;                   ///< "msd" (v1) or "nnunet" (v2)
  std::string name;                      ///< "name" in dataset.json, "" when absent
  std::vector<MsdCase> cases;            ///< sorted by id
  std::vector<MsdTestImage> test;        ///< sorted by id
  std::vector<std::string> class_names;  ///< by label id, 0 … N-1
  std::string channel;                   ///< the one channel's name ("CT"), "" when not given
  std::string file_ending;               ///< ".nii.gz"; v1: the first image's ending
};

/// Reads FOLDER/dataset.json and checks every listed file exists. Throws tessera::Error.
MsdDataset read_msd_dataset(const std::string& folder);

/// Which cases train and which validate (whole images).
struct MsdSplit {
  std::vector<MsdCase> training, validation;
};

/// `validation` names the validation cases; or, with folds > 0, fold K of N is every N-th
/// case (sorted by id) starting at the K-th (nnU-Net's splits are random: a documented
/// simplification). Neither: every case trains. Errors name the data.* key.
MsdSplit split_msd_cases(const MsdDataset& d, const std::vector<std::string>& validation, int fold, int folds);

/// The file name of a case's predicted labels: <case id><the image's file ending>, nnU-Net's
/// naming (the _0000 channel suffix dropped with the id).
std::string msd_prediction_file(const std::string& id, const std::string& image);

/// The test images and where their labels go: OUT_DIR/msd_prediction_file(…). Throws when the dataset lists no test image.
std::vector<std::pair<std::string, std::string>> msd_inference_jobs(const std::string& folder, const std::string& out_dir);

}  // namespace tessera::engine
