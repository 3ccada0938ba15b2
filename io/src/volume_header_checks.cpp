// What a volume file's header and payload may claim, checked before ITK allocates or reads
// a voxel, and what ITK's readers change silently (short payloads read as zeros, NaN as 0).
// Reads only headers and streams payloads in constant memory.
#include "volume_header_checks.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>

#include <zlib.h>

#include "tessera/core/error.hpp"
#include "volume_itk.hpp"

namespace tessera::io::detail {
namespace fs = std::filesystem;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

namespace {

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// ITK's NIfTI and MetaImage readers zero-fill (or keep garbage) when the voxel data ends
// early, e.g. after an interrupted copy, and report success. These checks read only the
// header and the file size; a gzip-compressed NIfTI is decompressed once more to its end.

// A value of type T at byte `offset` of `header`, byte-swapped when `swap`.
template <class T>
T header_value(const unsigned char* header, size_t offset, bool swap) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, header + offset, sizeof(T));
  if (swap) std::reverse(bytes, bytes + sizeof(T));
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

// sizeof_hdr of a NIfTI header: 348 (NIfTI-1) or 540 (NIfTI-2) in the file's byte order,
// which `swap` reports; anything else when it is neither.
// A header whose sizeof_hdr is wrong but whose magic at 344 says NIfTI-1 ("n+1", "ni1") is
// read by ITK's niftilib all the same (byte order from dim[0], 1..7): checked as NIfTI-1 too
// (a fuzzed sizeof_hdr of 413 with a NaN srow aborted ITK's SVD past the geometry check).
int32_t nifti_header_size(const unsigned char* h, bool& swap) {
  swap = false;
  const int32_t native = header_value<int32_t>(h, 0, false);
  if (native == 348 || native == 540) return native;
  swap = true;
  const int32_t swapped = header_value<int32_t>(h, 0, true);
  if (swapped == 348 || swapped == 540) return swapped;
  if ((std::memcmp(h + 344, "n+1", 4) == 0 || std::memcmp(h + 344, "ni1", 4) == 0)) {
    const int16_t dim0 = header_value<int16_t>(h, 40, false);
    swap = dim0 < 1 || dim0 > 7;
    return 348;
  }
  return swapped;
}

// A NIfTI-1 vox_offset (a float) as a byte offset, at least 352. NaN and values past any
// file size are clamped: converting them to an integer is undefined behaviour (UBSan,
// found by tests/fuzz/fuzz_volume; tests/fuzz/regressions/volume/huge_vox_offset.nii).
uint64_t nifti1_offset(float vox_offset) {
  if (!(vox_offset > 352.0f)) return 352;
  return vox_offset < 1e18f ? static_cast<uint64_t>(vox_offset) : uint64_t{1} << 60;
}

}  // namespace

// The geometry fields of a NIfTI-1 or -2 header that ITK turns into spacing, origin and
// direction: pixdim[1..dim] always, pixdim[0] (qfac), quatern_b/c/d and qoffset_x/y/z when
// qform_code > 0, srow_x/y/z when sform_code > 0. ITK's SVD of a non-finite matrix aborts.
std::optional<std::string> nifti_geometry_problem(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return std::nullopt;  // ITK says why
  std::vector<unsigned char> buffer(540);
  const int got = gzread(file, buffer.data(), 540);
  gzclose(file);
  if (got < 348) return std::nullopt;  // the payload check names a short header
  const unsigned char* h = buffer.data();
  bool swap = false;
  const int32_t header_size = nifti_header_size(h, swap);
  struct Field {
    const char* name;
    std::vector<double> values;
  };
  std::vector<Field> fields;
  if (header_size == 348) {
    auto floats = [&](size_t offset, int n) {
      std::vector<double> v;
      for (int i = 0; i < n; ++i) v.push_back(header_value<float>(h, offset + 4 * size_t(i), swap));
      return v;
    };
    const int dims = std::clamp<int>(header_value<int16_t>(h, 40, swap), 0, 7);
    fields.push_back({"pixdim (voxel spacing)", floats(80, dims)});
    if (header_value<int16_t>(h, 252, swap) > 0) {
      fields.push_back({"qform (pixdim[0], quatern_b/c/d, qoffset_x/y/z)", floats(76, 1)});
      for (double v : floats(256, 6)) fields.back().values.push_back(v);
    }
    if (header_value<int16_t>(h, 254, swap) > 0) fields.push_back({"sform (srow_x/y/z)", floats(280, 12)});
  } else if (header_size == 540 && got >= 540) {
    auto doubles = [&](size_t offset, int n) {
      std::vector<double> v;
      for (int i = 0; i < n; ++i) v.push_back(header_value<double>(h, offset + 8 * size_t(i), swap));
      return v;
    };
    const int dims = static_cast<int>(std::clamp<int64_t>(header_value<int64_t>(h, 16, swap), 0, 7));
    fields.push_back({"pixdim (voxel spacing)", doubles(112, dims)});
    if (header_value<int32_t>(h, 344, swap) > 0) {
      fields.push_back({"qform (pixdim[0], quatern_b/c/d, qoffset_x/y/z)", doubles(104, 1)});
      for (double v : doubles(352, 6)) fields.back().values.push_back(v);
    }
    if (header_value<int32_t>(h, 348, swap) > 0) fields.push_back({"sform (srow_x/y/z)", doubles(400, 12)});
  }
  // Finite is not enough: ITK builds the direction in float, and a value near FLT_MAX (a fuzzed
  // srow of -1.7e38) overflows there to Inf and aborts the same SVD. No geometry is 1e12 mm.
  constexpr double kLargest = 1e12;
  for (const Field& f : fields)
    for (double v : f.values) {
      if (!std::isfinite(v)) return std::string("NIfTI header has a non-finite ") + f.name;
      if (std::abs(v) > kLargest) return std::string("NIfTI header has an absurdly large (> 1e12) ") + f.name;
    }
  return std::nullopt;
}

namespace {

// Problem with a .nii / .nii.gz payload (NIfTI-1 or -2, plain or gzip), or nullopt.
std::optional<std::string> nifti_payload_problem(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return "cannot open file";
  std::vector<unsigned char> buffer(1 << 20);
  const int got = gzread(file, buffer.data(), 540);
  if (got < 348) {
    gzclose(file);
    return "file ends inside the NIfTI header";
  }
  const unsigned char* h = buffer.data();
  bool swap = false;
  const int32_t header_size = nifti_header_size(h, swap);
  uint64_t voxels = 1, bits = 0, offset = 0;
  bool known = true;
  if (header_size == 348) {
    const auto dims = header_value<int16_t>(h, 40, swap);
    known = dims >= 1 && dims <= 7;
    for (int i = 1; known && i <= dims; ++i) {
      const auto n = header_value<int16_t>(h, 40 + 2 * i, swap);
      known = n > 0;
      voxels *= static_cast<uint64_t>(std::max<int16_t>(n, 1));
    }
    bits = static_cast<uint64_t>(std::max<int16_t>(header_value<int16_t>(h, 72, swap), 0));
    offset = nifti1_offset(header_value<float>(h, 108, swap));
  } else if (header_size == 540 && got >= 540) {
    const auto dims = header_value<int64_t>(h, 16, swap);
    known = dims >= 1 && dims <= 7;
    for (int i = 1; known && i <= dims; ++i) {
      const auto n = header_value<int64_t>(h, 16 + 8 * i, swap);
      known = n > 0;
      voxels *= static_cast<uint64_t>(std::max<int64_t>(n, 1));
    }
    bits = static_cast<uint64_t>(std::max<int16_t>(header_value<int16_t>(h, 14, swap), 0));
    offset = static_cast<uint64_t>(std::max<int64_t>(header_value<int64_t>(h, 168, swap), 544));
  } else {
    known = false;
  }
  if (!known || bits == 0) {  // not ours to judge; ITK has accepted the header
    gzclose(file);
    return std::nullopt;
  }
  const uint64_t needed = offset + (voxels * bits + 7) / 8;

  uint64_t available = static_cast<uint64_t>(got);
  std::string problem;
  if (gzdirect(file) != 0) {
    std::error_code ec;
    available = fs::file_size(path, ec);
  } else {
    int n = 0;
    while ((n = gzread(file, buffer.data(), static_cast<unsigned>(buffer.size()))) > 0)
      available += static_cast<uint64_t>(n);
    int code = Z_OK;
    const char* message = gzerror(file, &code);
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END))
    {
      std::string reason = message ? message : "unknown error";
      if (reason.rfind(path + ": ", 0) == 0) reason = reason.substr(path.size() + 2);
      problem = "gzip data is damaged: " + reason;
    }
  }
  gzclose(file);
  if (available < needed)
    return "voxel data ends early (" + std::to_string(available) + " of " +
           std::to_string(needed) + " bytes" + (problem.empty() ? "" : "; " + problem) + ")";
  if (!problem.empty()) return problem;
  return std::nullopt;
}

// Problem with a MetaImage payload (.mha, or .mhd and its data file), or nullopt.
// `expected_bytes` is the uncompressed voxel data size from the header.
std::optional<std::string> metaimage_payload_problem(const std::string& path,
                                                     uint64_t expected_bytes) {
  std::ifstream header(path, std::ios::binary);
  if (!header) return "cannot open file";
  bool compressed = false;
  uint64_t compressed_size = 0;
  int64_t skip = 0;
  std::string data_file;
  std::string line;
  for (int lines = 0; lines < 1000 && std::getline(header, line); ++lines) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    auto trim = [](std::string s) {
      const auto first = s.find_first_not_of(" \t\r");
      const auto last = s.find_last_not_of(" \t\r");
      return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
    };
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (key == "CompressedData") compressed = lower(value) == "true";
    if (key == "CompressedDataSize") compressed_size = std::strtoull(value.c_str(), nullptr, 10);
    if (key == "HeaderSize") skip = std::strtoll(value.c_str(), nullptr, 10);
    if (key == "ElementDataFile") {
      data_file = value;
      break;
    }
  }
  if (data_file.empty()) return std::nullopt;
  uint64_t available = 0;
  std::error_code ec;
  if (data_file == "LOCAL") {
    const auto header_end = header.tellg();
    if (header_end < 0) return std::nullopt;
    const uint64_t size = fs::file_size(path, ec);
    available = size - std::min<uint64_t>(size, static_cast<uint64_t>(header_end));
  } else {
    if (data_file == "LIST" || data_file.find_first_of("% ") != std::string::npos)
      return std::nullopt;  // slice lists and patterns: left to ITK
    const fs::path data = fs::path(path).parent_path() / data_file;
    if (!fs::exists(data, ec)) return "data file " + data.string() + " is missing";
    const uint64_t size = fs::file_size(data, ec);
    available = size - std::min<uint64_t>(size, static_cast<uint64_t>(std::max<int64_t>(skip, 0)));
  }
  const uint64_t needed = compressed ? compressed_size : expected_bytes;
  if (available < needed)
    return "voxel data ends early (" + std::to_string(available) + " of " +
           std::to_string(needed) + " bytes)";
  return std::nullopt;
}

std::optional<std::string> nifti_or_metaimage_payload_problem(const std::string& path, const itk::ImageIOBase& io) {
  const std::string_view cls = io.GetNameOfClass();
  const std::string name = lower(fs::path(path).filename().string());
  if (cls == "NiftiImageIO" && (name.ends_with(".nii") || name.ends_with(".nii.gz")))
    return nifti_payload_problem(path);
  if (cls == "MetaImageIO") return metaimage_payload_problem(path, io.GetImageSizeInBytes());
  return std::nullopt;  // NRRD and GDCM report short data themselves
}

std::string join_sizes(const std::vector<uint64_t>& sizes) {
  std::string s;
  for (uint64_t n : sizes) s += (s.empty() ? "" : " x ") + std::to_string(n);
  return s;
}

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : uint64_t{1} << 40;
}

// A problem with a raw or gzip NRRD's attached payload (damaged, or too short for its
// header), or nullopt. Other encodings and detached data are checked by Teem while reading.
std::optional<std::string> nrrd_payload_problem(const std::string& path, uint64_t expected_bytes) {
  std::ifstream f(path, std::ios::binary);
  std::string line, encoding;
  bool detached = false;
  for (int lines = 0; lines < 1000 && std::getline(f, line); ++lines) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) break;  // end of the header
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = lower(line.substr(0, colon));
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (key == "encoding") encoding = lower(value);
    if (key == "data file" || key == "datafile" || key == "line skip" || key == "lineskip" ||
        key == "byte skip" || key == "byteskip")
      detached = true;  // offsets we do not model
  }
  const bool gzip = encoding == "gzip" || encoding == "gz";
  if (!f || (encoding != "raw" && !gzip) || detached) return std::nullopt;
  const auto header_end = f.tellg();
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec || header_end < 0) return std::nullopt;
  uint64_t available = size - std::min<uint64_t>(size, static_cast<uint64_t>(header_end));
  if (gzip) {  // count the decompressed bytes, in constant memory
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0 || ::lseek(fd, header_end, SEEK_SET) < 0) {
      if (fd >= 0) ::close(fd);
      return std::nullopt;
    }
    gzFile z = gzdopen(fd, "rb");
    if (z == nullptr) {
      ::close(fd);
      return std::nullopt;
    }
    std::vector<char> buffer(1 << 20);
    available = 0;
    int n = 0;
    while ((n = gzread(z, buffer.data(), static_cast<unsigned>(buffer.size()))) > 0) available += static_cast<uint64_t>(n);
    int code = Z_OK;
    gzerror(z, &code);
    gzclose(z);
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END))
      return "gzip data is damaged or ends early (" + std::to_string(available) + " of " +
             std::to_string(expected_bytes) + " bytes)";
  }
  if (available < expected_bytes)
    return "voxel data ends early (" + std::to_string(available) + " of " + std::to_string(expected_bytes) +
           " bytes)";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> payload_problem(const std::string& path, const itk::ImageIOBase& io) {
  if (std::string_view(io.GetNameOfClass()) == "NrrdImageIO")
    return nrrd_payload_problem(path, io.GetImageSizeInBytes());
  return nifti_or_metaimage_payload_problem(path, io);
}

// niftilib (inside ITK) replaces NaN and Inf in float data by 0 while reading; Tessera keeps
// them as NaN, i.e. no data. The non-finite voxels of a float NIfTI file (NIfTI-1 or -2,
// plain or gzip), by index in file order = ITK's buffer order; empty when there are none.
std::vector<bool> nifti_nonfinite_voxels(const std::string& path, uint64_t voxels) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return {};
  unsigned char h[540] = {};
  const int got = gzread(file, h, sizeof h);
  bool swap = header_value<int32_t>(h, 0, false) != 348 && header_value<int32_t>(h, 0, false) != 540;
  const int32_t header_size = header_value<int32_t>(h, 0, swap);
  int16_t datatype = 0;
  uint64_t offset = 0;
  if (header_size == 348 && got >= 348) {
    datatype = header_value<int16_t>(h, 70, swap);
    offset = nifti1_offset(header_value<float>(h, 108, swap));
  } else if (header_size == 540 && got >= 540) {
    datatype = header_value<int16_t>(h, 12, swap);
    offset = static_cast<uint64_t>(std::max<int64_t>(header_value<int64_t>(h, 168, swap), 544));
  }
  const size_t width = datatype == 16 ? 4 : datatype == 64 ? 8 : 0;  // DT_FLOAT32, DT_FLOAT64
  std::vector<bool> mask;
  if (width != 0 && gzseek(file, static_cast<z_off_t>(offset), SEEK_SET) >= 0) {
    std::vector<unsigned char> buffer(size_t{1} << 20);  // a multiple of both widths
    uint64_t index = 0;
    int n = 0;
    while (index < voxels && (n = gzread(file, buffer.data(), static_cast<unsigned>(buffer.size()))) > 0) {
      for (size_t at = 0; at + width <= static_cast<size_t>(n) && index < voxels; at += width, ++index) {
        const double v = width == 4 ? header_value<float>(buffer.data(), at, swap)
                                    : header_value<double>(buffer.data(), at, swap);
        if (std::isfinite(v)) continue;
        if (mask.empty()) mask.assign(voxels, false);
        mask[index] = true;
      }
    }
  }
  gzclose(file);
  return mask;
}

namespace {

// Header text for a message: at most 40 bytes, anything unprintable as '?'.
std::string shown(const std::string& text) {
  std::string out = text.substr(0, 40);
  for (char& ch : out)
    if (!std::isprint(static_cast<unsigned char>(ch))) ch = '?';
  return out;
}

// MetaIO's two multi-file forms of ElementDataFile, which MetaIO reads unsafely: a '%' pattern
// numbered by MIN MAX STEP ("slice%03d.raw 1 40 1") and LIST (one file name per following
// line). For both it splits the value into words of at most 79 bytes without checking the
// length (MET_StringToWordArray: a longer word overflows the heap); the pattern becomes
// snprintf's format and a zero step a divisor (SIGFPE); LIST's optional dimension indexes
// arrays unchecked. Found by tests/fuzz/fuzz_volume; regressions/volume/metaio_data_file_*.
// Tessera writes one data file per image (LOCAL or a file name) and reads only that. What
// the form is, for a message, or nullopt for a single data file.
std::optional<std::string> metaimage_multi_file_form(const std::string& value) {
  const size_t start = value.find_first_not_of("=: \t");  // as MetaIO, past separator and spaces
  if (value.find('%') != std::string::npos) return "a slice-file pattern ('%')";
  if (start != std::string::npos && value.compare(start, 4, "LIST") == 0) return "a slice-file list (LIST)";
  return std::nullopt;
}

}  // namespace

namespace {

// The fields of a MetaImage header that must agree, as read so far.
struct MetaImageFields {
  // NDims and DimSize must agree: with NDims = 0 (or a DimSize of another length) ITK sizes
  // its buffer from one and MetaIO reads the voxels by the other, past the buffer's end
  // (found by tests/fuzz/fuzz_volume; regressions/volume/metaio_zero_dims.mha).
  long ndims = -1;
  long dim_sizes = -1;
  // CompressedData = True without a CompressedDataSize makes MetaIO size its buffer from the
  // file's end, which a damaged header turns into an allocation of exabytes (found by
  // tests/fuzz/fuzz_volume; regressions/volume/metaio_compressed_without_size.mha). MetaIO
  // writes the size with every compressed image.
  bool compressed = false;
  long long compressed_size = -1;

  // Takes one field of header line `number`; a value MetaIO would misread is the problem.
  std::optional<std::string> take(const std::string& name, const std::string& value, int number) {
    const std::string at = "MetaImage header line " + std::to_string(number);
    if (name == "ndims") {
      char* rest = nullptr;
      ndims = std::strtol(value.c_str(), &rest, 10);
      if (ndims < 1 || ndims > 10) return at + ": NDims must be 1 to 10, not '" + value + "'";
    } else if (name == "dimsize") {
      std::istringstream values(value);
      long n = 0, count = 0;
      while (values >> n) {
        if (n < 1) return at + ": every DimSize must be positive";
        ++count;
      }
      dim_sizes = count;
    } else if (name == "compresseddata") {
      // As MetaIO reads a flag: past every separator and space, true when it starts with T, t
      // or 1 ("CompressedData == 1" is compressed to MetaIO; found by tests/fuzz/fuzz_volume).
      const size_t start = value.find_first_not_of("=: \t");
      compressed = start != std::string::npos && (value[start] == 'T' || value[start] == 't' || value[start] == '1');
    } else if (name == "compresseddatasize") {
      char* rest = nullptr;
      compressed_size = std::strtoll(value.c_str(), &rest, 10);
      if (compressed_size < 1) return at + ": CompressedDataSize must be a positive byte count, not '" + value + "'";
    }
    return std::nullopt;
  }

  // What the whole header lacks or contradicts.
  std::optional<std::string> problem() const {
    if (compressed && compressed_size < 1)
      return "MetaImage header says CompressedData = True but gives no CompressedDataSize";
    if (ndims < 1) return "MetaImage header has no NDims";
    if (dim_sizes != ndims)
      return "MetaImage header has NDims = " + std::to_string(ndims) + " but " +
             (dim_sizes < 0 ? std::string("no DimSize") : std::to_string(dim_sizes) + " DimSize values");
    return std::nullopt;
  }
};

}  // namespace

std::optional<std::string> metaimage_header_problem(const std::string& path) {
  // MetaIO reads each field name (up to '=', ':' or the line's end, at most 500 bytes) and
  // strcpy's it into a 255-byte record; a longer name overflows that buffer (found by
  // tests/fuzz/fuzz_volume). Real headers have names of a few dozen characters.
  constexpr size_t kMaxFieldName = 200;
  std::ifstream f(path, std::ios::binary);
  std::string line;
  MetaImageFields fields;
  std::map<std::string, int> first_line;  // field name → the line that gave it
  // The header ends at ElementDataFile; one this check never reaches could hold what it
  // refuses (below), so a header too long to read through is refused as well.
  constexpr int kMaxHeaderLines = 1000;
  int number = 1;
  for (; number <= kMaxHeaderLines && std::getline(f, line); ++number) {
    const size_t end = std::min(line.find_first_of("=:"), line.size());
    if (end > kMaxFieldName)
      return "MetaImage header line " + std::to_string(number) + " has no 'name = value' form (a field name of " +
             std::to_string(end) + " bytes)";
    std::string name = lower(line.substr(0, end));
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    // A field given twice: MetaIO and this check could each believe a different line (a
    // CompressedData unsaid by a damaged repeat led MetaIO to allocate 2^64 bytes; repeated
    // DimSize and CompressedData sent its decompression into an endless loop; found by
    // tests/fuzz/fuzz_volume, regressions/volume/metaio_compressed_repeated.mha and
    // metaio_repeated_fields_loop.mha). Writers give each field once.
    if (const auto [at, fresh] = first_line.emplace(name, number); !fresh && !name.empty())
      return "MetaImage header line " + std::to_string(number) + " repeats the field '" + shown(name) + "' of line " +
             std::to_string(at->second);
    const std::string value = end < line.size() ? line.substr(end + 1) : std::string();
    if (auto problem = fields.take(name, value, number)) return problem;
    if (name == "elementdatafile") {  // the header ends here
      if (const auto form = metaimage_multi_file_form(value))
        return "MetaImage header line " + std::to_string(number) + ": ElementDataFile '" +
               shown(value.substr(std::min(value.find_first_not_of("=: \t"), value.size()))) + "' is " + *form +
               "; only one data file per image (LOCAL or a file name) is supported";
      return fields.problem();
    }
  }
  if (number > kMaxHeaderLines)
    return "MetaImage header has no ElementDataFile in its first " + std::to_string(kMaxHeaderLines) + " lines";
  return fields.problem();
}

// Teem refuses a non-positive NRRD spacing itself, but ITK 5.2 leaks on that error path;
// this reads the "spacings:" field first. Problem, or nullopt.
std::optional<std::string> nrrd_spacing_problem(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string line;
  for (int lines = 0; lines < 1000 && std::getline(f, line) && !line.empty() && line != "\r"; ++lines) {
    if (lower(line).rfind("spacings:", 0) != 0) continue;
    std::istringstream values(line.substr(9));
    std::string v, all;
    bool ok = true;
    while (values >> v) {
      const double d = std::strtod(v.c_str(), nullptr);
      ok = ok && (lower(v) == "nan" || (std::isfinite(d) && d > 0));  // "nan": an axis without spacing
      all += (all.empty() ? "" : " x ") + v;
    }
    if (!ok) return "voxel spacing " + all + " mm: every spacing must be positive";
  }
  return std::nullopt;
}

// Everything a header can tell before a voxel is read or allocated: one scalar component,
// at most 3 non-trivial dimensions, positive finite spacing, a size that fits in memory and
// in the file. Throws naming the file.
void check_header(const std::string& path, const itk::ImageIOBase& io) {
  if (io.GetNumberOfComponents() != 1)
    fail(path, "volume has " + std::to_string(io.GetNumberOfComponents()) +
                   " components per voxel; only scalar volumes are supported");
  std::vector<uint64_t> sizes;
  for (unsigned d = 0; d < io.GetNumberOfDimensions(); ++d) sizes.push_back(io.GetDimensions(d));
  for (unsigned d = kVolumeDims; d < sizes.size(); ++d) {
    if (sizes[d] > 1)
      fail(path, "volume has " + std::to_string(sizes.size()) + " dimensions (" + join_sizes(sizes) +
                     "); only 3-D volumes are supported (a 4-D file with a single time point is fine)");
  }
  std::string spacing;
  bool spacing_ok = true;
  for (unsigned d = 0; d < std::min<unsigned>(kVolumeDims, io.GetNumberOfDimensions()); ++d) {
    const double s = io.GetSpacing(d);
    spacing_ok = spacing_ok && std::isfinite(s) && s > 0;
    spacing += (spacing.empty() ? "" : " x ") + format_number(s);
  }
  if (!spacing_ok) fail(path, "voxel spacing " + spacing + " mm: every spacing must be positive");
  // The reader holds the voxels twice (ITK's buffer, then ours) as float.
  long double bytes = 2.0L * sizeof(float);
  for (uint64_t n : sizes) bytes *= static_cast<long double>(n);
  const uint64_t memory = physical_memory_bytes();
  if (bytes > static_cast<long double>(memory)) {
    char need[32];
    std::snprintf(need, sizeof need, "%.3Lg", bytes / (1ull << 30));
    fail(path, "header claims " + join_sizes(sizes) + " voxels, " + need +
                   " GiB to read, more than this machine's memory (" + std::to_string(memory >> 30) + " GiB)");
  }
}


}  // namespace tessera::io::detail
