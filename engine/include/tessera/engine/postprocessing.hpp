#pragma once
// nnU-Net's post-processing, decided on a run's validation predictions: for each foreground
// class, the mean Dice over the validation cases with and without "keep the largest connected
// component" of that class (io/components.hpp); kept for a class only where it raises that
// class's Dice there. `tessera postprocess` writes the decision to RUN/postprocessing.json;
// `tessera infer` with a checkpoint of that run applies it to volumes by default
// (--no-postprocessing: not). Nothing is decided on test cases: --pred and --truth are the
// validation cases'. PostprocessOptions is the command's options, declared once. Torch-free.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::engine {

struct PostprocessOptions {
  std::string run;    ///< required: the run directory whose model made --pred
  std::string pred;   ///< required: folder of the validation cases' predicted label volumes
  std::string truth;  ///< required: folder of their true labels, under the same file names
  int classes = 0;    ///< 0: the largest label seen + 1

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(PostprocessOptions& o, V& v) {
  v.field("run", o.run, "Run directory of the model that made --pred; the decision goes to RUN/postprocessing.json");
  v.field("pred", o.pred, "Folder of the run's validation predictions (label volumes, e.g. case_001.nii.gz)");
  v.field("truth", o.truth, "Folder of the validation cases' true labels, under the same file names");
  v.field("classes", o.classes, "Number of classes (0, the default: the largest label seen + 1)");
}

/// One foreground class: its mean Dice over the cases that hold it (in the truth or the
/// prediction) without and with its largest component kept, and the choice.
struct ClassPostprocessing {
  int label = 0;
  int cases = 0;
  double dice_without = 0;
  double dice_with = 0;
  bool keep_largest = false;  ///< dice_with > dice_without
};

struct PostprocessingDecision {
  std::vector<std::string> cases;  ///< the validation predictions it was decided on
  std::vector<ClassPostprocessing> classes;
  /// The classes whose largest component is kept.
  std::vector<int> keep_largest() const;
  nlohmann::json to_json() const;
  /// Throws tessera::Error naming `path` when `j` is not what to_json writes.
  static PostprocessingDecision from_json(const nlohmann::json& j, const std::string& path);
};

/// The decision on predicted / true label volumes, pairwise (same extents). `classes` 0: the
/// largest label seen + 1. Throws tessera::Error naming a file that cannot be read or whose
/// extent differs from its pair's.
PostprocessingDecision decide_postprocessing(const std::vector<std::string>& pred, const std::vector<std::string>& truth,
                                             int classes);

/// The decision as a table, one class a line (its name from `class_names` by label, else its
/// number): cases, Dice without and with its largest component, kept or not.
std::string describe_postprocessing(const PostprocessingDecision& decision, const std::vector<std::string>& class_names = {});

/// RUN/postprocessing.json.
std::string postprocessing_path(const std::string& run_dir);
/// The run directory of a checkpoint RUN/checkpoints/NAME.pt, when there is one ("" else).
std::string run_of_checkpoint(const std::string& checkpoint);
/// The run's decision, when RUN/postprocessing.json exists. Throws tessera::Error naming the
/// file when it cannot be parsed.
std::optional<PostprocessingDecision> read_postprocessing(const std::string& run_dir);

/// The command: the pairs of --pred and --truth, decide_postprocessing, the table printed,
/// RUN/postprocessing.json written atomically. Throws tessera::Error naming the flag or file.
void run_postprocess(const PostprocessOptions& options);

}  // namespace tessera::engine
