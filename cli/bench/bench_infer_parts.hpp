#pragma once
// What the two files of `tessera bench infer` share (bench_infer.cpp: the speed comparison and
// unet-small; bench_infer_scenes.cpp: memory per scene and the volume rows).
#include <string>
#include <utility>
#include <vector>

#include "bench_infer_options.hpp"
#include "child_process.hpp"

namespace tessera::bench {

/// `tessera infer` arguments naming the network: a preset, randomly initialised (seed 0).
std::vector<std::string> random_model(const std::string& preset, int classes = 4);

/// `tessera infer` on `input` into work_dir/`output`: `tile` "stream" runs --mode stream,
/// another value --mode tile --tile `tile` ("auto" included). Throws when it fails.
cli::ChildResult tessera_infer(const BenchInferOptions& f, const std::string& input,
                               const std::vector<std::string>& model, const std::string& tile, int threads,
                               const std::string& precision = "fp32", const std::string& output = "labels.tif");

/// Pixels whose labels are equal in two label outputs of one size, and their count (read
/// through io::open_image, rasters and volumes alike).
std::pair<int64_t, int64_t> equal_labels(const std::string& a, const std::string& b);

/// `key` and what follows it in infer's summary line, up to the next comma ("" when absent);
/// the field after ", " first.
std::string summary_field(const std::string& out, const std::string& key);

constexpr int kRowLabel = 62;  ///< width of the tables' first column

}  // namespace tessera::bench
