// tessera-make-sample: writes the deterministic sample data the demo and the tests use.
//   tessera-make-sample --out DIR [--size 2048] [--ct-size 128] [--seed 7] [--targets 3]
//                       [--only scene|ct|all] [--msd DIR] [--ct-spacing XY Z] [--msd-modality CT|MR]
//                       [--hard [--cases 8] [--test-cases 3]]
// Besides the source scene and CT, --targets N target domains of each for domain adaptation
// (scene_t<k>, ct_t<k>, k = 1 … N): another layout or patient seen through another sensor
// or scanner; their labels are for evaluation only.
// --msd DIR writes the CTs as a Medical Segmentation Decathlon (v1) dataset instead of (or
// besides) --out: the source CT and the --targets target CTs as training cases
// (imagesTr/ct_000.nii.gz, labelsTr/ct_000.nii.gz, …), one more patient (seed + 1, its own
// scanner) in imagesTs/ct_test_000.nii.gz, and dataset.json naming the classes.
// --msd DIR --hard writes a harder dataset instead (ct_cases.hpp): --cases training cases and
// --test-cases held-out ones (imagesTs, with their labels in labelsTs for evaluation), every
// one another patient, scanner, spacing (a slice-to-pixel ratio drawn per case) and orientation.
// One summary line per file written; on failure one line naming the file, exit status 1.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ct_cases.hpp"
#include "ct_phantom.hpp"
#include "label_stats.hpp"
#include "ordered_jobs.hpp"
#include "random.hpp"
#include "scene_geotiff.hpp"
#include "scene_layout.hpp"
#include "scene_render.hpp"
#include "scene_sensor.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/io/volume.hpp"
#include "tessera/run/staged_file.hpp"

namespace fs = std::filesystem;
using namespace tessera;
using namespace tessera::sample;

namespace {

struct MakeSampleOptions {
  std::string out_dir;      ///< created when missing; required unless msd_dir is given
  std::string msd_dir;      ///< an MSD v1 dataset of the CTs; "" = none
  int size = 2048;          ///< scene width and height, pixels
  int ct_size = 128;        ///< CT voxels per axis
  uint64_t seed = 7;
  int targets = 3;           ///< target domains of each kind, 0 … kMaxTargetDomains
  std::string only = "all";  ///< "scene", "ct" or "all"
  std::vector<double> ct_spacing;  ///< CT spacing in-plane and between slices, mm; empty = CtOptions' defaults
  std::string msd_modality = "CT";  ///< --msd: CT (Hounsfield units) or MR (arbitrary units, a scale per case)
  bool hard = false;   ///< --msd: the harder dataset of ct_cases.hpp instead of the CTs of --out
  int cases = 8;       ///< --hard: training cases
  int test_cases = 3;  ///< --hard: held-out cases (imagesTs, labelsTs)

  // The phantom options of this run for `seed`.
  CtOptions ct_options(uint64_t case_seed) const {
    CtOptions c{ct_size, case_seed};
    if (ct_spacing.size() == 2) {
      c.spacing_xy = ct_spacing[0];
      c.spacing_z = ct_spacing[1];
    }
    return c;
  }

  void validate() const {
    if (out_dir.empty() && msd_dir.empty()) throw Error("--out: an output folder is required (or --msd DIR)");
    if (!msd_dir.empty() && !hard && targets < 1)
      throw Error("--msd: needs --targets 1 or more (a dataset of at least two training cases)");
    if (targets < 0 || targets > kMaxTargetDomains)
      throw Error("--targets: " + std::to_string(targets) + " is outside [0, " +
                  std::to_string(kMaxTargetDomains) + "]");
    if (only != "scene" && only != "ct" && only != "all")
      throw Error("--only: '" + only + "' is not one of scene, ct, all");
    SceneOptions{size, seed}.validate();
    ct_options(seed).validate();
    if (msd_modality != "CT" && msd_modality != "MR")
      throw Error("--msd-modality: '" + msd_modality + "' is not CT or MR");
    if (hard && msd_dir.empty()) throw Error("--hard: needs --msd DIR (the hard dataset is an MSD folder)");
    if (hard && msd_modality != "CT") throw Error("--hard: CT only (each case has its own scanner gain already)");
    if (cases < 2 || cases > 999) throw Error("--cases: " + std::to_string(cases) + " is outside [2, 999]");
    if (test_cases < 1 || test_cases > 999) throw Error("--test-cases: " + std::to_string(test_cases) + " is outside [1, 999]");
  }
};

std::string mib(const fs::path& path) {
  std::error_code ec;
  uintmax_t bytes = 0;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (entry.is_regular_file()) bytes += entry.file_size();
  } else {
    bytes = fs::file_size(path, ec);
  }
  return fmt::format("{:.2f} MiB", double(bytes) / (1024.0 * 1024.0));
}

// File stem of domain k: `base` for the source, `base`_t<k> for target domain k.
std::string domain_stem(const std::string& base, int k) {
  return k == 0 ? base : fmt::format("{}_t{}", base, k);
}

constexpr unsigned kMaxWorkers = 4;  // threads writing domains at once
constexpr const char* kEvaluationOnly = "evaluation only, not for training";

// The source scene (k = 0) or target scene k: its own layout, rendered through its sensor.
std::string make_scene(const MakeSampleOptions& o, int k) {
  std::string summary;
  const uint64_t seed = domain_seed(o.seed, k);
  const SceneLayout layout = make_scene_layout(SceneOptions{o.size, seed});
  const SceneSensor sensor = k == 0 ? SceneSensor::source() : SceneSensor::target_domain(o.seed, k);
  const int size = sensor.output_size(o.size);
  const fs::path dir(o.out_dir);
  const std::string image = (dir / (domain_stem("scene", k) + ".tif")).string();
  const std::string labels = (dir / (domain_stem("scene", k) + "_labels.tif")).string();

  const std::string domain =
      k == 0 ? "" : fmt::format("target domain {}: other layout, other sensor", k);
  write_scene_image(image, layout, sensor, seed,
                    k == 0 ? "synthetic aerial scene, reflectance x 10000"
                           : "synthetic aerial scene, " + domain + " (TESSERA_SENSOR)");
  summary += fmt::format(
      "{}: {}x{} 4-band UInt16 (red green blue nir), EPSG:{}, {} m pixels, {}{}\n", image, size,
      size, kSceneEpsg, sensor.pixel_metres,
      k == 0 ? "" : fmt::format("{} (noise {:.0f} DN, blue haze up to {:.0f} DN), ", domain,
                                sensor.noise_sigma, sensor.haze[2]),
      mib(image));

  const std::vector<uint8_t> classes = sensor_labels(layout, sensor);
  write_scene_labels(labels, classes, size, sensor.pixel_metres,
                     k == 0 ? ""
                            : fmt::format("classes of {}, {}", fs::path(image).filename().string(),
                                          kEvaluationOnly));
  const Index extent{size, size};
  const int64_t held = size - (3 * int64_t(size)) / 4;
  const auto all = class_fractions(classes, extent, {0, 0}, extent, kSceneClassCount);
  const auto back =
      class_fractions(classes, extent, {0, size - held}, {size, held}, kSceneClassCount);
  summary += fmt::format(
      "{}: {}x{} Byte, {}{}; all: {}; held back x>={}: {}\n", labels, size, size,
      k == 0 ? "" : fmt::format("{} m pixels, {}, ", sensor.pixel_metres, kEvaluationOnly),
      mib(labels), format_fractions(scene_class_names(), all), size - held,
      format_fractions(scene_class_names(), back));
  return summary;
}

void write_ct_volume(const CtPhantom& ct, const std::string& path) {
  io::write_volume(path, ct.extent, ct.geo, ct.hu, /*as_int16=*/true);
}

void write_ct_labels(const CtPhantom& ct, const std::string& path) {
  io::LabelVolumeWriter writer(path, ct.extent, ct.geo);
  Block<uint8_t> block;
  block.shape = {1, ct.extent[0], ct.extent[1], ct.extent[2]};
  block.data = ct.labels;
  writer.write(Box{{0, 0, 0}, ct.extent}, block);
  writer.commit();
}

// The source CT (k = 0, also as DICOM) or target CT k: another patient on another scanner.
std::string make_ct(const MakeSampleOptions& o, int k) {
  std::string summary;
  CtOptions options = o.ct_options(o.seed);
  options.domain = k;
  const CtPhantom ct = make_ct_phantom(options);
  const fs::path dir(o.out_dir);
  const std::string volume = (dir / (domain_stem("ct", k) + ".nii.gz")).string();
  const std::string labels = (dir / (domain_stem("ct", k) + "_labels.nii.gz")).string();
  const auto& g = ct.geo;
  const std::string shape = fmt::format("{}x{}x{} (x y z), spacing {}x{}x{} mm", ct.extent[2],
                                        ct.extent[1], ct.extent[0], g.spacing[0], g.spacing[1],
                                        g.spacing[2]);

  write_ct_volume(ct, volume);
  summary += fmt::format(
      "{}: {} Int16 HU, {}{}\n", volume, shape,
      k == 0 ? "" : fmt::format("target domain {}: other patient, {}, ", k, ct.scanner.describe()),
      mib(volume));

  write_ct_labels(ct, labels);
  const int64_t nz = ct.extent[0], z0 = (3 * nz) / 4;
  const auto all = class_fractions(ct.labels, ct.extent, {0, 0, 0}, ct.extent, kCtClassCount);
  const auto back = class_fractions(ct.labels, ct.extent, {z0, 0, 0},
                                    {nz - z0, ct.extent[1], ct.extent[2]}, kCtClassCount);
  summary += fmt::format("{}: {} UInt8, {}{}; all: {}; held back z>={}: {}\n", labels, shape,
                         k == 0 ? "" : fmt::format("{}, ", kEvaluationOnly), mib(labels),
                         format_fractions(ct_class_names(), all), z0,
                         format_fractions(ct_class_names(), back));

  if (k != 0) return summary;
  const std::string dicom = (dir / "ct_dicom").string();
  io::write_dicom_series(dicom, ct.extent, ct.geo, ct.hu);
  summary += fmt::format("{}/: {} slices, {}\n", dicom, nz, mib(dicom));
  return summary;
}

// --msd: training case k (0 = the source CT, k = target k) or, with test, the test patient.
std::string make_msd_case(const MakeSampleOptions& o, int k, bool test) {
  CtOptions options = o.ct_options(test ? o.seed + 1 : o.seed);
  options.domain = test ? 1 : k;
  CtPhantom ct = make_ct_phantom(options);
  const fs::path dir(o.msd_dir);
  const std::string id = fmt::format("{}_{:03d}", test ? "ct_test" : "ct", k);
  const std::string image = (dir / (test ? "imagesTs" : "imagesTr") / (id + ".nii.gz")).string();
  fs::create_directories(fs::path(image).parent_path());
  std::string summary;
  if (o.msd_modality == "MR") {
    // MR-like: no absolute unit; every case has its own scale (coil, gain), air at 0.
    const double gain = 0.4 + 0.35 * (test ? 4 : k);
    for (float& v : ct.hu) v = static_cast<float>(gain * std::max(0.0, double(v) + 1000.0));
    io::write_volume(image, ct.extent, ct.geo, ct.hu, /*as_int16=*/false);
    summary = fmt::format("{}: {}x{}x{} Float32 MR-like (gain {:.2f}), {}\n", image, ct.extent[2], ct.extent[1],
                          ct.extent[0], gain, k == 0 && !test ? "source" : ct.scanner.describe());
  } else {
    write_ct_volume(ct, image);
    summary = fmt::format("{}: {}x{}x{} Int16 HU, {}\n", image, ct.extent[2], ct.extent[1], ct.extent[0],
                          k == 0 && !test ? "source CT" : ct.scanner.describe());
  }
  if (test) return summary;
  const std::string labels = (dir / "labelsTr" / (id + ".nii.gz")).string();
  fs::create_directories(fs::path(labels).parent_path());
  write_ct_labels(ct, labels);
  return summary + fmt::format("{}: UInt8 labels\n", labels);
}

// --msd --hard: case `index`; the first o.cases train, the others are held out with their labels.
std::string make_hard_case(const MakeSampleOptions& o, int index) {
  const CtPhantom ct = make_hard_ct_case(o.seed, index, o.ct_size);
  const bool test = index >= o.cases;
  const fs::path dir(o.msd_dir);
  const std::string name = fmt::format("case_{:03d}.nii.gz", index);
  const std::string image = (dir / (test ? "imagesTs" : "imagesTr") / name).string();
  const std::string labels = (dir / (test ? "labelsTs" : "labelsTr") / name).string();
  fs::create_directories(fs::path(image).parent_path());
  fs::create_directories(fs::path(labels).parent_path());
  write_ct_volume(ct, image);
  write_ct_labels(ct, labels);
  return fmt::format("{}: {}x{}x{} Int16 HU, {}\n{}: UInt8 labels{}\n", image, ct.extent[2], ct.extent[1], ct.extent[0],
                     describe_hard_case(ct), labels, test ? ", held out (evaluation only)" : "");
}

// --msd: dataset.json in the Decathlon's v1 layout, after the files it lists.
std::string write_msd_json(const MakeSampleOptions& o) {
  nlohmann::ordered_json j;
  j["name"] = "TesseraCtPhantom";
  j["description"] = "Synthetic abdominal CT phantoms from tessera-make-sample";
  j["tensorImageSize"] = "3D";
  j["modality"] = {{"0", o.msd_modality == "MR" ? "MRI" : "CT"}};
  const std::vector<std::string>& names = ct_class_names();
  j["labels"] = nlohmann::ordered_json::object();
  for (size_t i = 0; i < names.size(); ++i) j["labels"][std::to_string(i)] = names[i];
  const int training = o.hard ? o.cases : o.targets + 1, tests = o.hard ? o.test_cases : 1;
  if (o.hard)
    j["description"] = "Synthetic abdominal CT phantoms from tessera-make-sample --hard: every case its own patient, "
                       "scanner, spacing and orientation; the test cases' labels are in labelsTs";
  j["numTraining"] = training;
  j["numTest"] = tests;
  j["training"] = nlohmann::ordered_json::array();
  for (int k = 0; k < training; ++k) {
    const std::string id = fmt::format("{}_{:03d}.nii.gz", o.hard ? "case" : "ct", k);
    j["training"].push_back({{"image", "./imagesTr/" + id}, {"label", "./labelsTr/" + id}});
  }
  j["test"] = nlohmann::ordered_json::array();
  for (int k = 0; k < tests; ++k)
    j["test"].push_back(o.hard ? fmt::format("./imagesTs/case_{:03d}.nii.gz", training + k) : "./imagesTs/ct_test_000.nii.gz");
  const std::string path = (fs::path(o.msd_dir) / "dataset.json").string();
  write_file_atomically(path, {j.dump(2), "\n"});
  return fmt::format("{}: MSD v1, {} training cases, {} test image{}, labels {}\n", path, training, tests,
                     tests == 1 ? "" : "s", fmt::join(names, ", "));
}

// Every file to write as a job: the scenes first (the source is the longest job), then the CTs.
std::vector<SummaryJob> sample_jobs(const MakeSampleOptions& o) {
  std::vector<SummaryJob> jobs;
  const bool out = !o.out_dir.empty();
  for (int k = 0; k <= o.targets && out && o.only != "ct"; ++k)
    jobs.emplace_back([&o, k] { return make_scene(o, k); });
  for (int k = 0; k <= o.targets && out && o.only != "scene"; ++k)
    jobs.emplace_back([&o, k] { return make_ct(o, k); });
  if (o.msd_dir.empty()) return jobs;
  if (o.hard) {
    for (int k = 0; k < o.cases + o.test_cases; ++k) jobs.emplace_back([&o, k] { return make_hard_case(o, k); });
    return jobs;
  }
  for (int k = 0; k <= o.targets; ++k)
    jobs.emplace_back([&o, k] { return make_msd_case(o, k, false); });
  jobs.emplace_back([&o] { return make_msd_case(o, 0, true); });
  return jobs;
}

}  // namespace

int main(int argc, char** argv) {
  MakeSampleOptions options;
  CLI::App app{"Writes Tessera's deterministic sample data: a 4-band GeoTIFF scene with "
               "labels and a CT volume with labels (NIfTI and DICOM), plus target domains of "
               "both for domain adaptation."};
  app.add_option("--out", options.out_dir, "output folder (created when missing)");
  app.add_option("--msd", options.msd_dir,
                 "also (or, without --out, only) write the CTs as a Medical Segmentation Decathlon dataset "
                 "(imagesTr, labelsTr, imagesTs, dataset.json) in this folder");
  app.add_option("--size", options.size, "scene width and height in pixels")
      ->capture_default_str();
  app.add_option("--ct-size", options.ct_size, "CT voxels per axis")->capture_default_str();
  app.add_option("--seed", options.seed, "random seed; same seed, same bytes")
      ->capture_default_str();
  app.add_option("--targets", options.targets,
                 "target domains of the scene and of the CT for domain adaptation (0-7); "
                 "their labels are for evaluation only")
      ->capture_default_str();
  app.add_option("--only", options.only, "what to write: scene, ct or all")
      ->capture_default_str();
  app.add_option("--ct-spacing", options.ct_spacing,
                 "CT spacing in mm: in-plane and between slices (default 0.9 2.0)")
      ->expected(2);
  app.add_option("--msd-modality", options.msd_modality,
                 "--msd: CT (Int16 HU) or MR (Float32, arbitrary units, another gain per case)")
      ->capture_default_str();
  app.add_flag("--hard", options.hard,
               "--msd: a harder dataset instead: every case its own patient, scanner (gain, noise), spacing "
               "(anisotropic) and orientation (axis flips); held-out cases in imagesTs with labelsTs");
  app.add_option("--cases", options.cases, "--hard: training cases")->capture_default_str();
  app.add_option("--test-cases", options.test_cases, "--hard: held-out test cases (labels in labelsTs)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;  // --help is success; every usage error is status 1
  }

  try {
    options.validate();
    // The hard dataset draws every case's spacing and counts its cases itself.
    for (const char* flag : {"--ct-spacing", "--targets"})
      if (options.hard && app.count(flag) > 0)
        throw Error(std::string(flag) + ": has no effect with --hard (each case draws its spacing; --cases and "
                    "--test-cases count the cases)");
    for (const std::string& dir : {options.out_dir, options.msd_dir}) {
      std::error_code ec;
      if (!dir.empty()) fs::create_directories(dir, ec);
      if (ec) throw Error(dir + ": cannot create folder (" + ec.message() + ")");
    }
    const auto start = std::chrono::steady_clock::now();
    // GDAL's drivers are registered here, once, before any worker thread opens a file:
    // GDALAllRegister() is not safe to call from several threads at once.
    io::init_gdal();
    // Domains are independent and deterministic each, so they run side by side; memory grows
    // with the workers, hence the cap.
    const unsigned workers = std::clamp(std::thread::hardware_concurrency(), 1u, kMaxWorkers);
    run_ordered_jobs(sample_jobs(options), workers, [](const std::string& summary) {
      fmt::print("{}", summary);
      std::fflush(stdout);
    });
    if (!options.msd_dir.empty()) fmt::print("{}", write_msd_json(options));
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    fmt::print("tessera-make-sample: done in {:.1f} s (seed {}, {} target domains)\n",
               took.count(), options.seed, options.targets);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-make-sample: %s\n", e.what());
    return 1;
  }
  return 0;
}
