// tessera-fuzz-seeds --out DIR [--import DIR...]: the seed corpus of the fuzz targets,
// generated at test time (no binary seeds in the repository). Writes small, valid inputs
// that reach deep into each reader:
//   DIR/raster/  GeoTIFFs (striped, tiled, compressed, Float32 with NaN and nodata, alpha,
//                internal mask, overviews, palette, rotated geotransform, 1 x 1), PNG, JPEG
//   DIR/volume/  one selector byte (see fuzz_volume.cpp) + a NIfTI, NRRD, MetaImage or DICOM
//                file, float and int16, compressed and raw
//   DIR/config/  the files of every --import folder ending in .yaml
// Then the odd and broken files of tests/fixtures (make_fixtures) and of every --import
// folder are copied into the matching folder by extension; files over 256 KiB are left out.
#include <cpl_conv.h>
#include <gdal.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/io/volume.hpp"

namespace fs = std::filesystem;

namespace {

constexpr char kUtm33[] =
    R"(PROJCS["WGS 84 / UTM zone 33N",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],)"
    R"(PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],PROJECTION["Transverse_Mercator"],)"
    R"(PARAMETER["latitude_of_origin",0],PARAMETER["central_meridian",15],PARAMETER["scale_factor",0.9996],)"
    R"(PARAMETER["false_easting",500000],PARAMETER["false_northing",0],UNIT["metre",1],AUTHORITY["EPSG","32633"]])";

struct RasterSeed {
  std::string name;
  std::string driver = "GTiff";
  int width = 16, height = 12, bands = 1;
  GDALDataType type = GDT_Byte;
  std::vector<std::string> options;
  std::vector<double> geotransform{500000, 10, 0, 4600000, 0, -10};
  bool nodata = false, nan = false, alpha = false, mask = false, overviews = false, palette = false;
};

void check(bool ok, const std::string& what) {
  if (!ok) throw tessera::Error(what + ": " + CPLGetLastErrorMsg());
}

// Built in memory, then copied: CreateCopy is the one path every driver (PNG, JPEG) has.
void write_raster(const fs::path& dir, const RasterSeed& s) {
  GDALDatasetH mem = GDALCreate(GDALGetDriverByName("MEM"), "", s.width, s.height, s.bands, s.type, nullptr);
  check(mem != nullptr, s.name);
  if (!s.geotransform.empty()) {
    GDALSetGeoTransform(mem, const_cast<double*>(s.geotransform.data()));
    GDALSetProjection(mem, kUtm33);
  }
  std::vector<float> pixels(static_cast<size_t>(s.width) * s.height);
  for (int b = 1; b <= s.bands; ++b) {
    for (int y = 0; y < s.height; ++y)
      for (int x = 0; x < s.width; ++x) pixels[y * s.width + x] = float((x * 7 + y * 13 + b * 31) % 200);
    if (s.nan) pixels[1] = NAN;
    if (s.nodata) pixels[2] = -9999;
    GDALRasterBandH band = GDALGetRasterBand(mem, b);
    check(GDALRasterIO(band, GF_Write, 0, 0, s.width, s.height, pixels.data(), s.width, s.height, GDT_Float32, 0,
                       0) == CE_None,
          s.name);
    if (s.nodata) GDALSetRasterNoDataValue(band, s.type == GDT_Byte ? 0 : -9999);
    if (s.alpha && b == s.bands) GDALSetRasterColorInterpretation(band, GCI_AlphaBand);
  }
  if (s.palette) {
    GDALColorTableH table = GDALCreateColorTable(GPI_RGB);
    for (short i = 0; i < 256; ++i) {
      const GDALColorEntry e{short(i), short(255 - i), short(i / 2), 255};
      GDALSetColorEntry(table, i, &e);
    }
    GDALSetRasterColorTable(GDALGetRasterBand(mem, 1), table);
    GDALDestroyColorTable(table);
  }
  std::vector<const char*> options;
  for (const auto& o : s.options) options.push_back(o.c_str());
  options.push_back(nullptr);
  const std::string path = (dir / s.name).string();
  if (s.mask) CPLSetConfigOption("GDAL_TIFF_INTERNAL_MASK", "YES");
  GDALDatasetH out = GDALCreateCopy(GDALGetDriverByName(s.driver.c_str()), path.c_str(), mem, FALSE,
                                    const_cast<char**>(options.data()), nullptr, nullptr);
  GDALClose(mem);
  check(out != nullptr, path);
  if (s.mask) {
    check(GDALCreateDatasetMaskBand(out, GMF_PER_DATASET) == CE_None, path);
    std::vector<uint8_t> mask(static_cast<size_t>(s.width) * s.height, 255);
    mask[0] = 0;
    GDALRasterBandH m = GDALGetMaskBand(GDALGetRasterBand(out, 1));
    check(GDALRasterIO(m, GF_Write, 0, 0, s.width, s.height, mask.data(), s.width, s.height, GDT_Byte, 0, 0) ==
              CE_None,
          path);
    CPLSetConfigOption("GDAL_TIFF_INTERNAL_MASK", nullptr);
  }
  if (s.overviews) {
    const int levels[] = {2, 4};
    check(GDALBuildOverviews(out, "AVERAGE", 2, levels, 0, nullptr, nullptr, nullptr) == CE_None, path);
  }
  GDALClose(out);
}

void write_rasters(const fs::path& dir) {
  std::vector<RasterSeed> seeds;
  seeds.push_back({.name = "striped_rgb.tif", .bands = 3});
  seeds.push_back({.name = "tiled_deflate.tif", .width = 40, .height = 36,
                   .options = {"TILED=YES", "BLOCKXSIZE=16", "BLOCKYSIZE=16", "COMPRESS=DEFLATE"}});
  seeds.push_back({.name = "float_nan_nodata_lzw.tif", .width = 9, .height = 7, .bands = 2, .type = GDT_Float32,
                   .options = {"COMPRESS=LZW", "PREDICTOR=3"}, .nodata = true, .nan = true});
  seeds.push_back({.name = "uint16_alpha_packbits.tif", .width = 8, .height = 8, .bands = 4, .type = GDT_UInt16,
                   .options = {"COMPRESS=PACKBITS", "PHOTOMETRIC=RGB", "ALPHA=YES"}, .alpha = true});
  seeds.push_back({.name = "one_pixel_int16.tif", .width = 1, .height = 1, .type = GDT_Int16});
  seeds.push_back({.name = "palette_labels.tif", .width = 20, .height = 20, .options = {"COMPRESS=DEFLATE"},
                   .nodata = true, .palette = true});
  seeds.push_back({.name = "rotated_band_interleave.tif", .width = 10, .height = 10, .bands = 2,
                   .options = {"INTERLEAVE=BAND"}, .geotransform = {1000, 8.66, 5, 2000, 5, -8.66}});
  seeds.push_back({.name = "internal_mask.tif", .width = 12, .height = 12, .options = {"TILED=YES", "BLOCKXSIZE=16",
                   "BLOCKYSIZE=16"}, .mask = true});
  seeds.push_back({.name = "overviews.tif", .width = 32, .height = 32, .overviews = true});
  seeds.push_back({.name = "jpeg_in_tiff.tif", .width = 16, .height = 16, .options = {"COMPRESS=JPEG"}});
  seeds.push_back({.name = "no_georeference.tif", .width = 5, .height = 3, .type = GDT_Int32, .geotransform = {}});
  seeds.push_back({.name = "complex.tif", .width = 4, .height = 4, .type = GDT_CInt16});
  seeds.push_back({.name = "bigtiff.tif", .width = 6, .height = 6, .options = {"BIGTIFF=YES"}});
  seeds.push_back({.name = "gray.png", .driver = "PNG", .width = 8, .height = 8, .geotransform = {}});
  seeds.push_back({.name = "rgb.jpg", .driver = "JPEG", .width = 16, .height = 8, .bands = 3, .geotransform = {}});
  for (const auto& s : seeds) write_raster(dir, s);
}

std::vector<char> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, char selector, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.put(selector);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw tessera::Error(path.string() + ": cannot write");
}

// The selector byte fuzz_volume.cpp reads for a file name; -1 for names it does not take.
int volume_selector(const std::string& name) {
  if (name.ends_with(".nii")) return 0;
  if (name.ends_with(".nii.gz")) return 1;
  if (name.ends_with(".nrrd")) return 3;
  if (name.ends_with(".mha")) return 4;
  if (name.ends_with(".dcm")) return 5;
  return -1;
}

void write_volumes(const fs::path& dir, const fs::path& scratch) {
  const tessera::Index extent{3, 4, 5};  // (z, y, x)
  tessera::Georeference geo;
  geo.spacing = {0.7, 0.8, 2.5};
  geo.origin = {-10, 20, 5};
  geo.direction = {1, 0, 0, 0, 0, 1, 0, -1, 0};
  std::vector<float> voxels(60);
  for (size_t i = 0; i < voxels.size(); ++i) voxels[i] = float(i) * 17 - 400;
  const char* names[] = {"float.nii", "int16.nii.gz", "float.nrrd", "int16.mha"};
  for (const char* name : names) {
    const fs::path file = scratch / name;
    tessera::io::write_volume(file.string(), extent, geo, voxels, std::string(name).find("int16") == 0);
    write_bytes(dir / name, char(volume_selector(name)), read_bytes(file));
  }
  // The NIfTI behind selector 2 is gzipped by the target: give it the plain bytes.
  write_bytes(dir / "float_gzipped_by_target.nii", 2, read_bytes(scratch / "float.nii"));
  tessera::io::write_volume((scratch / "flat.nii").string(), {1, 4, 5}, geo, std::vector<float>(20, 1.0f), false);
  write_bytes(dir / "one_slice.nii", 0, read_bytes(scratch / "flat.nii"));
  // Uncompressed text-header formats, written by hand: the fuzzer mutates their fields.
  std::vector<char> raw(2 * 24);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = char(i * 5);
  const std::string nrrd =
      "NRRD0004\ntype: short\ndimension: 3\nspace: left-posterior-superior\nsizes: 4 3 2\n"
      "space directions: (0.5,0,0) (0,0.5,0) (0,0,2)\nspace origin: (1,2,3)\nendian: little\nencoding: raw\n\n";
  std::vector<char> bytes(nrrd.begin(), nrrd.end());
  bytes.insert(bytes.end(), raw.begin(), raw.end());
  write_bytes(dir / "raw.nrrd", 3, bytes);
  const std::string ascii = "NRRD0004\ntype: float\ndimension: 3\nsizes: 2 2 2\nencoding: ascii\n\n1 2 3 4 5 6 7 8\n";
  write_bytes(dir / "ascii.nrrd", 3, {ascii.begin(), ascii.end()});
  const std::string mha =
      "ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
      "Offset = 1 2 3\nElementSpacing = 0.5 0.5 2\nDimSize = 4 3 2\nElementType = MET_SHORT\n"
      "ElementDataFile = LOCAL\n";
  bytes.assign(mha.begin(), mha.end());
  bytes.insert(bytes.end(), raw.begin(), raw.end());
  write_bytes(dir / "raw.mha", 4, bytes);
  // One DICOM slice (a series of two, written by write_dicom_series).
  tessera::io::write_dicom_series((scratch / "dicom").string(), {2, 4, 5}, geo, std::vector<float>(40, 30.0f));
  write_bytes(dir / "slice.dcm", 5, read_bytes(scratch / "dicom" / "slice_0001.dcm"));
}

void import_files(const fs::path& from, const fs::path& out) {
  constexpr uintmax_t kMaxSeedBytes = 256 << 10;
  for (const auto& entry : fs::recursive_directory_iterator(from)) {
    if (!entry.is_regular_file() || entry.file_size() > kMaxSeedBytes) continue;
    const std::string name = entry.path().filename().string();
    const std::string flat = fs::relative(entry.path(), from).string();
    std::string unique;
    for (char c : flat) unique += c == '/' ? '_' : c;
    if (const int selector = volume_selector(name); selector >= 0) {
      write_bytes(out / "volume" / ("fixture_" + unique), char(selector), read_bytes(entry.path()));
    } else if (name.ends_with(".tif") || name.ends_with(".tiff") || name.ends_with(".png") ||
               name.ends_with(".jpg") || name.ends_with(".img")) {
      fs::copy_file(entry.path(), out / "raster" / ("fixture_" + unique), fs::copy_options::overwrite_existing);
    } else if (name.ends_with(".yaml") || name.ends_with(".yml")) {
      fs::copy_file(entry.path(), out / "config" / ("fixture_" + unique), fs::copy_options::overwrite_existing);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  fs::path out;
  std::vector<fs::path> imports;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--out") out = argv[i + 1];
    else if (flag == "--import") imports.emplace_back(argv[i + 1]);
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: tessera-fuzz-seeds --out DIR [--import DIR]...\n");
    return 2;
  }
  try {
    tessera::io::init_gdal();
    tessera::io::ensure_all_gdal_drivers();  // PNG and JPEG seeds
    for (const char* sub : {"raster", "volume", "config"}) {  // replaced, never mixed with an older run
      fs::remove_all(out / sub);
      fs::create_directories(out / sub);
    }
    const fs::path scratch = out / ".scratch";
    fs::create_directories(scratch);
    write_rasters(out / "raster");
    write_volumes(out / "volume", scratch);
    tessera::fixtures::make_fixtures(scratch / "fixtures");
    import_files(scratch / "fixtures", out);
    fs::remove_all(scratch);
    for (const auto& from : imports) import_files(from, out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-fuzz-seeds: error: %s\n", e.what());
    return 1;
  }
  std::printf("seeds written to %s\n", out.c_str());
  return 0;
}
