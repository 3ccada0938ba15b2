// tessera-make-sample: writes the deterministic sample data the demo and the tests use.
//   tessera-make-sample --out DIR [--size 2048] [--ct-size 128] [--seed 7] [--only scene|ct|all]
// One summary line per file written; on failure one line naming the file, exit status 1.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "ct_phantom.hpp"
#include "label_stats.hpp"
#include "scene_geotiff.hpp"
#include "scene_layout.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/volume.hpp"

namespace fs = std::filesystem;
using namespace tessera;
using namespace tessera::sample;

namespace {

struct MakeSampleOptions {
  std::string out_dir;      ///< required; created when missing
  int size = 2048;          ///< scene width and height, pixels
  int ct_size = 128;        ///< CT voxels per axis
  uint64_t seed = 7;
  std::string only = "all";  ///< "scene", "ct" or "all"

  void validate() const {
    if (out_dir.empty()) throw Error("--out: an output folder is required");
    if (only != "scene" && only != "ct" && only != "all")
      throw Error("--only: '" + only + "' is not one of scene, ct, all");
    SceneOptions{size, seed}.validate();
    CtOptions{ct_size, seed}.validate();
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

void make_scene(const MakeSampleOptions& o) {
  const SceneLayout layout = make_scene_layout(SceneOptions{o.size, o.seed});
  const std::string image = (fs::path(o.out_dir) / "scene.tif").string();
  const std::string labels = (fs::path(o.out_dir) / "scene_labels.tif").string();
  write_scene_image(image, layout, o.seed);
  fmt::print("{}: {}x{} 4-band UInt16 (red green blue nir), EPSG:{}, {} m pixels, {}\n", image,
             o.size, o.size, kSceneEpsg, kScenePixelMetres, mib(image));
  write_scene_labels(labels, layout);
  const Index extent{o.size, o.size};
  const int64_t held = o.size - (3 * int64_t(o.size)) / 4;
  const auto all = class_fractions(layout.labels, extent, {0, 0}, extent, kSceneClassCount);
  const auto back = class_fractions(layout.labels, extent, {0, o.size - held}, {o.size, held},
                                    kSceneClassCount);
  fmt::print("{}: {}x{} Byte, {}; all: {}; held back x>={}: {}\n", labels, o.size, o.size,
             mib(labels), format_fractions(scene_class_names(), all), o.size - held,
             format_fractions(scene_class_names(), back));
}

void make_ct(const MakeSampleOptions& o) {
  const CtPhantom ct = make_ct_phantom(CtOptions{o.ct_size, o.seed});
  const fs::path dir(o.out_dir);
  const std::string volume = (dir / "ct.nii.gz").string();
  const std::string labels = (dir / "ct_labels.nii.gz").string();
  const std::string dicom = (dir / "ct_dicom").string();
  const auto& g = ct.geo;
  const std::string shape = fmt::format("{}x{}x{} (x y z), spacing {}x{}x{} mm", ct.extent[2],
                                        ct.extent[1], ct.extent[0], g.spacing[0], g.spacing[1],
                                        g.spacing[2]);

  io::write_volume(volume, ct.extent, ct.geo, ct.hu, /*as_int16=*/true);
  fmt::print("{}: {} Int16 HU, {}\n", volume, shape, mib(volume));

  io::LabelVolumeWriter writer(labels, ct.extent, ct.geo);
  Block<uint8_t> block;
  block.shape = {1, ct.extent[0], ct.extent[1], ct.extent[2]};
  block.data = ct.labels;
  writer.write(Box{{0, 0, 0}, ct.extent}, block);
  writer.commit();
  const int64_t nz = ct.extent[0], z0 = (3 * nz) / 4;
  const auto all = class_fractions(ct.labels, ct.extent, {0, 0, 0}, ct.extent, kCtClassCount);
  const auto back = class_fractions(ct.labels, ct.extent, {z0, 0, 0},
                                    {nz - z0, ct.extent[1], ct.extent[2]}, kCtClassCount);
  fmt::print("{}: {} UInt8, {}; all: {}; held back z>={}: {}\n", labels, shape, mib(labels),
             format_fractions(ct_class_names(), all), z0,
             format_fractions(ct_class_names(), back));

  io::write_dicom_series(dicom, ct.extent, ct.geo, ct.hu);
  fmt::print("{}/: {} slices, {}\n", dicom, nz, mib(dicom));
}

}  // namespace

int main(int argc, char** argv) {
  MakeSampleOptions options;
  CLI::App app{"Writes Tessera's deterministic sample data: a 4-band GeoTIFF scene with "
               "labels and a CT volume with labels (NIfTI and DICOM)."};
  app.add_option("--out", options.out_dir, "output folder (created when missing)")->required();
  app.add_option("--size", options.size, "scene width and height in pixels")
      ->capture_default_str();
  app.add_option("--ct-size", options.ct_size, "CT voxels per axis")->capture_default_str();
  app.add_option("--seed", options.seed, "random seed; same seed, same bytes")
      ->capture_default_str();
  app.add_option("--only", options.only, "what to write: scene, ct or all")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;  // --help is success; every usage error is status 1
  }

  try {
    options.validate();
    std::error_code ec;
    fs::create_directories(options.out_dir, ec);
    if (ec) throw Error(options.out_dir + ": cannot create folder (" + ec.message() + ")");
    const auto start = std::chrono::steady_clock::now();
    if (options.only != "ct") make_scene(options);
    if (options.only != "scene") make_ct(options);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    fmt::print("tessera-make-sample: done in {:.1f} s (seed {})\n", took.count(), options.seed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-make-sample: %s\n", e.what());
    return 1;
  }
  return 0;
}
