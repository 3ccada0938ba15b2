// --auto's end: the validation cases inferred as `tessera infer` does, and the post-processing
// decided on them (train_parts.hpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "train_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/sliding_window.hpp"
#include "tessera/core/unet_spec.hpp"
#include "tessera/engine/infer_job.hpp"
#include "tessera/engine/msd_dataset.hpp"
#include "tessera/engine/postprocessing.hpp"
#include "tessera/parallel/comm/runtime.hpp"
#include "tessera/run/output_set.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::engine::train {
namespace {

namespace fs = std::filesystem;

// What a case's inference costs besides its windows' forwards (reading and resampling onto the
// network grid, blending, the probabilities back onto the case's grid, writing), as a factor
// over the windows' forwards timed at the start. The hard benchmark's run (docs/new-dataset.md)
// used 15 s where its forwards were timed at 31 s (a factor 3 reserved 93 s): 1.5 keeps
// a margin for a loaded host without taking training time for nothing.
constexpr double kValidationOverhead = 1.5;
constexpr double kSlidingOverlap = 0.5;  // tessera infer's Gaussian windows

// Seconds of one window's forward (inference mode), the median of 3 after a warm-up.
double window_forward_seconds(const UNetOptions& model, const Index& window) {
  torch::manual_seed(0);
  UNet net(model);
  net->eval();
  torch::NoGradGuard no_grad;
  std::vector<int64_t> shape{1, model.in_channels};
  shape.insert(shape.end(), window.begin(), window.end());
  const torch::Tensor x = torch::zeros(shape);
  std::vector<double> t;
  for (int k = 0; k < 4; ++k) {
    const auto start = std::chrono::steady_clock::now();
    (void)net->forward(x);
    if (k > 0) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(t.begin(), t.begin() + 1, t.end());
  return t[1];
}

// One case through `tessera infer`'s engine with its defaults (the checkpoint's Gaussian
// windows, no post-processing: that is what is being decided).
void infer_case(const std::string& checkpoint, const MsdCase& k, const std::string& output, int threads) {
  InferOptions o;
  o.checkpoint = checkpoint;
  o.input = k.image;
  o.output = output;
  o.postprocessing = false;
  o.progress = false;
  o.threads = threads;
  try {
    InferJob(o).run(parallel::world());
  } catch (const Error& e) {
    throw Error("validation case " + k.id + ": " + e.what() + " (the run's checkpoints are kept)");
  }
}

}  // namespace

bool decides_postprocessing(const TrainRequest& r, const Dataset& data) {
  return r.auto_plan.active && !data.validation_cases.empty() && data.validation.size() == data.validation_cases.size() &&
         parallel::world().size() == 1;
}

double validation_seconds(const RunConfig& c, const Dataset& data, std::string& why) {
  const UNetOptions& model = c.model.options;
  const Index window = training_window(model, c.train.tile);
  int64_t windows = 0;
  for (const TrainingPair& p : data.validation) {
    int64_t n = 1;
    const Index& extent = p.image->info().extent;
    for (size_t a = 0; a < extent.size(); ++a)
      n *= int64_t(window_starts(extent[a], window[a], kSlidingOverlap, unet_alignment(model)).size());
    windows += n;
  }
  const double forward = window_forward_seconds(model, window);
  const double seconds = kValidationOverhead * double(windows) * forward;
  why = fmt::format("the {} validation cases' Gaussian windows ({}, overlap 1/2) × {:.3g} s a window's forward (timed now) × "
                    "{} (reading, resampling both ways, writing): reserved from --time-budget before sizing the steps",
                    data.validation.size(), windows, forward, kValidationOverhead);
  return seconds;
}

void decide_on_validation(const RunConfig& c, const TrainRequest& r, const std::vector<MsdCase>& cases) {
  const auto start = std::chrono::steady_clock::now();
  const RunLayout run(c.train.run_dir);
  OutputSet outputs;
  std::vector<std::string> pred, truth;
  for (const MsdCase& k : cases) {
    const std::string out =
        outputs.stage((fs::path(c.train.run_dir) / "validation" / msd_prediction_file(k.id, k.image)).string());
    std::fprintf(stderr, "train: validation: inferring %s\n", k.id.c_str());
    infer_case(run.last_checkpoint(), k, out, r.threads.value_or(0));
    pred.push_back(out);
    truth.push_back(k.label);
  }
  const PostprocessingDecision d = decide_postprocessing(pred, truth, c.model.options.classes);
  const std::string json = outputs.stage(postprocessing_path(c.train.run_dir));
  write_file_atomically(json, {d.to_json().dump(2), "\n"});
  outputs.commit();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "train: validation: %zu cases inferred and decided in %.0f s -> %s/validation/, %s\n%s",
               pred.size(), seconds, c.train.run_dir.c_str(), postprocessing_path(c.train.run_dir).c_str(),
               describe_postprocessing(d, c.data.class_names).c_str());
}

}  // namespace tessera::engine::train
