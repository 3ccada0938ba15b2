// Fuzz target: tessera::io::RasterReader (GDAL) on arbitrary file contents.
// Opens the input as a file, then exercises what the CLI and the viewer do with a raster:
// info(), windowed reads (corners, a single pixel, the whole image when small), the band
// statistics and both previews. The contract under test: every failure is a tessera::Error;
// no crash, no other exception, shapes as promised, memory in proportion to the windows.
//
// Only the drivers a Tessera user meets are registered (GeoTIFF and the common still-image
// formats); VRT and friends would let an input name other files or URLs, which tests GDAL's
// sandboxing rather than our reader.
#include <gdal.h>

#include <algorithm>
#include <cpl_conv.h>
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_input.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/raster.hpp"

namespace {

using tessera::Block;
using tessera::Box;

// Bytes per window of floats, so a header claiming thousands of bands does not turn every
// window into gigabytes: the harness shrinks the window, as a tile planner would.
constexpr int64_t kWindowBytes = int64_t{16} << 20;
// Whole-raster passes (statistics, previews) read every block: only for moderate extents.
constexpr int64_t kWholePixels = int64_t{1} << 22;

void keep_only_user_drivers() {
  static const std::set<std::string> keep{"GTiff", "PNG", "JPEG", "GIF", "BMP", "HFA", "JP2OpenJPEG", "WEBP"};
  for (int i = GDALGetDriverCount() - 1; i >= 0; --i) {
    GDALDriverH driver = GDALGetDriver(i);
    if (keep.count(GDALGetDriverShortName(driver))) continue;
    GDALDeregisterDriver(driver);
    GDALDestroyDriver(driver);  // deregistered drivers are no longer GDAL's to free
  }
}

void check_block(const Block<float>& block, int channels, const Box& box) {
  TESSERA_FUZZ_EXPECT((block.shape == tessera::Index{channels, box.size[0], box.size[1]}));
  TESSERA_FUZZ_EXPECT(static_cast<int64_t>(block.data.size()) == block.numel());
}

void read_windows(const tessera::io::RasterReader& reader) {
  const auto& info = reader.info();
  const int64_t h = info.extent[0], w = info.extent[1];
  const int64_t per_pixel = int64_t{4} * info.channels;
  int64_t side = 64;
  while (side > 1 && side * side * per_pixel > kWindowBytes) side /= 2;
  const int64_t wh = std::min(h, side), ww = std::min(w, side);
  const Box windows[] = {
      {{0, 0}, {wh, ww}},
      {{h - wh, w - ww}, {wh, ww}},
      {{(h - wh) / 2, (w - ww) / 2}, {wh, ww}},
      {{h - 1, w - 1}, {1, 1}},
      {{0, 0}, {0, 0}},
  };
  for (const Box& box : windows) {
    try {
      check_block(reader.read(box), info.channels, box);
    } catch (const tessera::Error&) {
      // a damaged block: reported with the file name, the next window may still read
    }
  }
  try {  // outside the raster: an error, never a read past the end
    reader.read(Box{{h - 1, w - 1}, {2, 2}});
    TESSERA_FUZZ_EXPECT(!"a window outside the raster was read");
  } catch (const tessera::Error&) {
  }
}

void read_whole(const tessera::io::RasterReader& reader) {
  const auto& info = reader.info();
  if (info.extent[0] * info.extent[1] > kWholePixels || info.channels > 16) return;
  try {
    const auto stats = reader.band_statistics();
    TESSERA_FUZZ_EXPECT(static_cast<int>(stats.offset.size()) == info.channels);
    TESSERA_FUZZ_EXPECT(static_cast<int>(stats.scale.size()) == info.channels);
  } catch (const tessera::Error&) {
  }
  for (bool nearest : {false, true}) {
    try {
      const Block<float> preview = reader.read_preview(32, nearest);
      TESSERA_FUZZ_EXPECT(preview.shape.size() == 3 && preview.shape[0] == info.channels);
      TESSERA_FUZZ_EXPECT(preview.shape[1] >= 1 && preview.shape[1] <= 32);
      TESSERA_FUZZ_EXPECT(preview.shape[2] >= 1 && preview.shape[2] <= 32);
    } catch (const tessera::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tessera::io::init_gdal();
  tessera::io::ensure_all_gdal_drivers();  // all of them now (the reader's fallback adds none later), then
                                           // all but the formats a user's file comes in
  keep_only_user_drivers();
  // Sibling files (.aux.xml, .ovr, world files) are not part of the input.
  CPLSetConfigOption("GDAL_DISABLE_READDIR_ON_OPEN", "EMPTY_DIR");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tessera::fuzz::write_input("input.tif", data, size);
  try {
    const tessera::io::RasterReader reader(path);
    const auto& info = reader.info();
    TESSERA_FUZZ_EXPECT(info.extent.size() == 2 && info.extent[0] > 0 && info.extent[1] > 0);
    TESSERA_FUZZ_EXPECT(info.channels >= 1 && static_cast<int>(info.nodata.size()) == info.channels);
    TESSERA_FUZZ_EXPECT(info.geo.geotransform.empty() || info.geo.geotransform.size() == 6);
    read_windows(reader);
    read_whole(reader);
  } catch (const tessera::Error&) {
    // not a raster, or a damaged one: the expected outcome for most inputs
  }
  return 0;
}
