// Fuzz target: tessera::io::VolumeReader (ITK: NIfTI, NRRD, MetaImage, DICOM) on arbitrary
// file contents. ITK picks its reader by file name as well as by content, so the first
// input byte chooses the name (see kFormats); the rest is the file. Selector 2 gzips the
// rest first, so the fuzzer mutates NIfTI headers behind a valid .nii.gz; selector 1 keeps
// the bytes as they are and so exercises damaged gzip streams.
// The contract under test: every failure is a tessera::Error naming the file; no crash, no
// other exception, geometry and extent as promised, memory in proportion to the file.
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_input.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/volume.hpp"

namespace {

using tessera::Block;
using tessera::Box;
using tessera::Index;

struct Format {
  const char* name;
  bool gzip;  // compress the payload before writing
};
constexpr Format kFormats[] = {
    {"input.nii", false}, {"input.nii.gz", false}, {"input.nii.gz", true},
    {"input.nrrd", false}, {"input.mha", false},   {"input.dcm", false},
};
constexpr size_t kFormatCount = sizeof(kFormats) / sizeof(kFormats[0]);

std::string write_gzip(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = tessera::fuzz::write_input(name, nullptr, 0);
  gzFile out = gzopen(path.c_str(), "wb");
  TESSERA_FUZZ_EXPECT(out != nullptr);
  if (size > 0) TESSERA_FUZZ_EXPECT(gzwrite(out, data, static_cast<unsigned>(size)) == static_cast<int>(size));
  TESSERA_FUZZ_EXPECT(gzclose(out) == Z_OK);
  return path;
}

void check_geometry(const tessera::ImageInfo& info) {
  TESSERA_FUZZ_EXPECT(info.extent.size() == 3);
  for (int64_t e : info.extent) TESSERA_FUZZ_EXPECT(e > 0);
  TESSERA_FUZZ_EXPECT(info.channels == 1 && info.nodata.size() == 1);
  TESSERA_FUZZ_EXPECT(info.geo.spacing.size() == 3 && info.geo.origin.size() == 3);
  TESSERA_FUZZ_EXPECT(info.geo.direction.size() == 9);
}

void read_boxes(const tessera::io::VolumeReader& reader) {
  const Index& e = reader.info().extent;
  const Index side{std::min<int64_t>(e[0], 8), std::min<int64_t>(e[1], 8), std::min<int64_t>(e[2], 8)};
  const Box boxes[] = {
      {{0, 0, 0}, side},
      {{e[0] - side[0], e[1] - side[1], e[2] - side[2]}, side},
      {{e[0] - 1, e[1] - 1, e[2] - 1}, {1, 1, 1}},
      {{0, 0, 0}, {0, 0, 0}},
  };
  for (const Box& box : boxes) {
    const Block<float> block = reader.read(box);
    TESSERA_FUZZ_EXPECT((block.shape == Index{1, box.size[0], box.size[1], box.size[2]}));
    TESSERA_FUZZ_EXPECT(static_cast<int64_t>(block.data.size()) == box.count());
  }
}

// TESSERA_FUZZ_SKIP_DICOM=1 leaves single DICOM files out; only the short exploration under
// ctest (fuzz.volume, label explore) sets it: Debian's GDCM asserts, or zero-fills gigabytes,
// on damaged files within a minute of fuzzing (README.md), which would fail that run at
// random. The gating replay refuses to run with it set (run_target.sh); run_fuzz.sh keeps
// DICOM in.
bool skip_dicom() {
  static const bool skip = [] {
    const char* v = std::getenv("TESSERA_FUZZ_SKIP_DICOM");
    return v != nullptr && std::string(v) == "1";
  }();
  return skip;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Format& format = kFormats[data[0] % kFormatCount];
  if (skip_dicom() && std::string(format.name).ends_with(".dcm")) return -1;  // not kept in the corpus
  const std::string path = format.gzip ? write_gzip(format.name, data + 1, size - 1)
                                       : tessera::fuzz::write_input(format.name, data + 1, size - 1);
  try {
    const tessera::io::VolumeReader reader(path);
    check_geometry(reader.info());
    read_boxes(reader);
  } catch (const tessera::Error&) {
    // not a volume, or a damaged one: the expected outcome for most inputs
  }
  return 0;
}
