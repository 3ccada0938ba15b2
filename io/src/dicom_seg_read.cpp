// read_dicom_seg: a DICOM SEG (any writer's: Tessera, dcmqi, Slicer, OHIF) onto a volume's voxel
// grid through DCMTK's dcmseg, each frame placed by its own Plane Position so the frame order
// does not matter. See tessera/io/dicom_seg.hpp.
#include <array>
#include <cmath>
#include <fstream>
#include <memory>
#include <string_view>

#include "dcmtk/config/osconfig.h"  // first, as DCMTK asks
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcfilefo.h"
#include "dcmtk/dcmdata/dcuid.h"
#include "dcmtk/dcmfg/fginterface.h"
#include "dcmtk/dcmfg/fgpixmsr.h"
#include "dcmtk/dcmfg/fgplanor.h"
#include "dcmtk/dcmfg/fgplanpo.h"
#include "dcmtk/dcmfg/fgseg.h"
#include "dcmtk/dcmiod/cielabutil.h"
#include "dcmtk/dcmseg/segdoc.h"
#include "dcmtk/dcmseg/segment.h"
#include "dcmtk/dcmseg/segutils.h"

#include "tessera/core/error.hpp"
#include "tessera/io/dicom_seg.hpp"
#include "volume_dicom.hpp"

namespace tessera::io {
namespace {

using Vec3 = std::array<double, 3>;

// Continuous voxel index (x, y, z) of an LPS point on the grid of `geo`.
struct GridMap {
  Vec3 origin{};
  std::array<double, 9> inverse{};  // (direction · diag(spacing))⁻¹, row-major

  explicit GridMap(const Georeference& geo) {
    std::array<double, 9> m{};
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) m[size_t(r * 3 + c)] = geo.direction[size_t(r * 3 + c)] * geo.spacing[size_t(c)];
    const double det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
                       m[2] * (m[3] * m[7] - m[4] * m[6]);
    TESSERA_CHECK(std::abs(det) > 0);
    inverse = {(m[4] * m[8] - m[5] * m[7]) / det, (m[2] * m[7] - m[1] * m[8]) / det, (m[1] * m[5] - m[2] * m[4]) / det,
               (m[5] * m[6] - m[3] * m[8]) / det, (m[0] * m[8] - m[2] * m[6]) / det, (m[2] * m[3] - m[0] * m[5]) / det,
               (m[3] * m[7] - m[4] * m[6]) / det, (m[1] * m[6] - m[0] * m[7]) / det, (m[0] * m[4] - m[1] * m[3]) / det};
    for (int i = 0; i < 3; ++i) origin[size_t(i)] = geo.origin[size_t(i)];
  }
  // A displacement (no origin) in index units.
  Vec3 step(const Vec3& d) const {
    Vec3 out{};
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) out[size_t(r)] += inverse[size_t(r * 3 + c)] * d[size_t(c)];
    return out;
  }
  Vec3 index(const Vec3& p) const { return step({p[0] - origin[0], p[1] - origin[1], p[2] - origin[2]}); }
};

// How far `v` is from the nearest whole numbers, in voxels.
double off_grid(const Vec3& v) {
  double worst = 0;
  for (double x : v) worst = std::max(worst, std::abs(x - std::round(x)));
  return worst;
}

// The frames' geometry shared by all (or per frame, when a writer put it there).
struct FrameGeometry {
  Vec3 row_dir{}, col_dir{};  // along a row (increasing column), along a column (increasing row)
  double row_spacing = 0, col_spacing = 0;  // between rows, between columns (mm)
};

FrameGeometry frame_geometry(FGInterface& groups, Uint32 frame, const std::string& path) {
  OFBool per_frame = OFFalse;
  auto* orientation = dynamic_cast<FGPlaneOrientationPatient*>(groups.get(frame, DcmFGTypes::EFG_PLANEORIENTPATIENT, per_frame));
  auto* measures = dynamic_cast<FGPixelMeasures*>(groups.get(frame, DcmFGTypes::EFG_PIXELMEASURES, per_frame));
  if (!orientation || !measures)
    throw Error(path + ": DICOM SEG frame " + std::to_string(frame + 1) + " has no Plane Orientation or Pixel Measures");
  FrameGeometry g;
  Float64 o[6] = {};
  if (orientation->getImageOrientationPatient(o[0], o[1], o[2], o[3], o[4], o[5]).bad() ||
      measures->getPixelSpacing(g.row_spacing, 0).bad() || measures->getPixelSpacing(g.col_spacing, 1).bad())
    throw Error(path + ": DICOM SEG frame " + std::to_string(frame + 1) + ": unreadable orientation or pixel spacing");
  g.row_dir = {o[0], o[1], o[2]};
  g.col_dir = {o[3], o[4], o[5]};
  return g;
}

// Frame `f`'s pixels as one byte each (0 or 1); fractional frames thresholded at half.
std::vector<uint8_t> frame_mask(DcmSegmentation& seg, size_t f, Uint16 rows, Uint16 cols, Uint16 max_fraction,
                                const std::string& path) {
  const DcmIODTypes::Frame* frame = seg.getFrame(f);
  if (!frame) throw Error(path + ": DICOM SEG frame " + std::to_string(f + 1) + " has no pixel data");
  const size_t n = size_t(rows) * cols;
  std::vector<uint8_t> mask(n, 0);
  if (seg.getSegmentationType() == DcmSegTypes::ST_BINARY && frame->length < n) {
    std::unique_ptr<DcmIODTypes::Frame> unpacked(DcmSegUtils::unpackBinaryFrame(frame, rows, cols));
    if (!unpacked || unpacked->length < n) throw Error(path + ": DICOM SEG frame " + std::to_string(f + 1) + " is truncated");
    for (size_t i = 0; i < n; ++i) mask[i] = unpacked->pixData[i] != 0;
    return mask;
  }
  if (frame->length < n) throw Error(path + ": DICOM SEG frame " + std::to_string(f + 1) + " is truncated");
  for (size_t i = 0; i < n; ++i) mask[i] = 2u * frame->pixData[i] >= max_fraction && frame->pixData[i] != 0;
  return mask;
}

std::vector<DicomSegSegment> read_segments(DcmSegmentation& seg, const std::string& path) {
  const size_t count = seg.getNumberOfSegments();
  if (count > 254) throw Error(path + ": DICOM SEG has " + std::to_string(count) + " segments; at most 254 can be shown");
  std::vector<DicomSegSegment> out;
  for (size_t number = 1; number <= count; ++number) {
    DcmSegment* s = seg.getSegment(number);
    if (!s) continue;
    DicomSegSegment d;
    d.number = int(number);
    OFString label;
    s->getSegmentLabel(label);
    d.label = label.c_str();
    Uint16 L = 0, a = 0, b = 0;
    if (s->getRecommendedDisplayCIELabValue(L, a, b).good() && (L || a || b)) {
      double r = 0, g = 0, bl = 0;
      IODCIELabUtil::dicomLab2RGB(r, g, bl, L, a, b);
      const auto byte = [](double v) { return uint8_t(std::lround(std::clamp(v, 0.0, 1.0) * 255.0)); };
      d.color = Rgb{byte(r), byte(g), byte(bl)};
    }
    out.push_back(std::move(d));
  }
  return out;
}

// Places frame `f` (segment `number`) on the grid; throws when it is not on it.
// The pixels' layout: rows, columns and (fractional SEGs) the value meaning "all of the voxel".
struct FrameFormat {
  Uint16 rows = 0, cols = 0, max_fraction = 1;
};

void place_frame(DcmSegmentation& seg, size_t f, int number, const FrameFormat& format, const GridMap& grid,
                 const Index& extent, const std::string& path, std::vector<uint8_t>& labels) {
  const Uint16 rows = format.rows, cols = format.cols;
  FGInterface& groups = seg.getFunctionalGroups();
  const FrameGeometry g = frame_geometry(groups, Uint32(f), path);
  OFBool per_frame = OFFalse;
  auto* position = dynamic_cast<FGPlanePosPatient*>(groups.get(Uint32(f), DcmFGTypes::EFG_PLANEPOSPATIENT, per_frame));
  Float64 p[3] = {};
  if (!position || position->getImagePositionPatient(p[0], p[1], p[2]).bad())
    throw Error(path + ": DICOM SEG frame " + std::to_string(f + 1) + " has no Plane Position");
  const Vec3 start = grid.index({p[0], p[1], p[2]});
  const Vec3 along_row = grid.step({g.row_dir[0] * g.col_spacing, g.row_dir[1] * g.col_spacing, g.row_dir[2] * g.col_spacing});
  const Vec3 along_col = grid.step({g.col_dir[0] * g.row_spacing, g.col_dir[1] * g.row_spacing, g.col_dir[2] * g.row_spacing});
  // On the grid: the first pixel on a voxel centre, one pixel step one voxel along one axis.
  const auto unit = [](const Vec3& v) {
    int axes = 0;
    for (double x : v) axes += std::abs(std::abs(x) - 1.0) < 1e-3 ? 1 : std::abs(x) < 1e-3 ? 0 : 10;
    return axes == 1;
  };
  if (off_grid(start) > 1e-2 || !unit(along_row) || !unit(along_col))
    throw Error(path + ": DICOM SEG frame " + std::to_string(f + 1) +
                " does not lie on the image's voxel grid (another orientation, spacing or slice position): "
                "it was made for another series");
  const std::vector<uint8_t> mask = frame_mask(seg, f, rows, cols, format.max_fraction, path);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      if (!mask[size_t(r * cols + c)]) continue;
      int64_t ix[3];
      for (int a = 0; a < 3; ++a)
        ix[a] = std::llround(start[size_t(a)] + double(c) * along_row[size_t(a)] + double(r) * along_col[size_t(a)]);
      if (ix[0] < 0 || ix[1] < 0 || ix[2] < 0 || ix[0] >= extent[2] || ix[1] >= extent[1] || ix[2] >= extent[0])
        throw Error(path + ": DICOM SEG frame " + std::to_string(f + 1) + " reaches outside the image (voxel " +
                    std::to_string(ix[0]) + ", " + std::to_string(ix[1]) + ", " + std::to_string(ix[2]) +
                    "): it was made for another series");
      uint8_t& v = labels[size_t((ix[2] * extent[1] + ix[1]) * extent[2] + ix[0])];
      v = uint8_t(std::max<int>(v, number));
    }
}

}  // namespace

bool is_dicom_seg(const std::string& path) {
  // A SEG is a DICOM Part 10 file: "DICM" after the 128-byte preamble. Anything else (a NIfTI,
  // a folder) is answered without DCMTK parsing its bytes as a dataset.
  char magic[4] = {};
  std::ifstream in(path, std::ios::binary);
  if (!in.seekg(128) || !in.read(magic, 4) || std::string_view(magic, 4) != "DICM") return false;
  detail::quiet_dcmtk();
  DcmFileFormat file;
  // Values over 4 KiB (the pixel data) are left unread.
  if (file.loadFile(path.c_str(), EXS_Unknown, EGL_noChange, 4096).bad()) return false;
  OFString sop_class;
  file.getDataset()->findAndGetOFString(DCM_SOPClassUID, sop_class);
  return sop_class == UID_SegmentationStorage;
}

DicomSegLabels read_dicom_seg(const std::string& path, const Index& extent, const Georeference& geo) {
  TESSERA_CHECK(extent.size() == 3 && geo.spacing.size() == 3 && geo.origin.size() == 3 && geo.direction.size() == 9);
  detail::quiet_dcmtk();
  DcmFileFormat file;
  OFCondition loaded = file.loadFile(path.c_str());
  DcmSegmentation* raw = nullptr;
  if (loaded.good()) loaded = DcmSegmentation::loadDataset(*file.getDataset(), raw);
  std::unique_ptr<DcmSegmentation> seg(raw);
  if (loaded.bad() || !seg) throw Error(path + ": not a readable DICOM SEG: " + (loaded.text() ? loaded.text() : "DCMTK error"));
  FrameFormat format;
  file.getDataset()->findAndGetUint16(DCM_Rows, format.rows);
  file.getDataset()->findAndGetUint16(DCM_Columns, format.cols);
  if (file.getDataset()->findAndGetUint16(DCM_MaximumFractionalValue, format.max_fraction).bad() || format.max_fraction == 0)
    format.max_fraction = 1;
  DicomSegLabels out;
  out.segments = read_segments(*seg, path);
  out.labels.assign(size_t(extent[0] * extent[1] * extent[2]), 0);
  const GridMap grid(geo);
  for (size_t f = 0; f < seg->getNumberOfFrames(); ++f) {
    OFBool per_frame = OFFalse;
    auto* segment = dynamic_cast<FGSegmentation*>(seg->getFunctionalGroups().get(Uint32(f), DcmFGTypes::EFG_SEGMENTATION, per_frame));
    Uint16 number = 0;
    if (!segment || segment->getReferencedSegmentNumber(number).bad() || number == 0 || number > 254)
      throw Error(path + ": DICOM SEG frame " + std::to_string(f + 1) + " names no segment (1..254)");
    place_frame(*seg, f, number, format, grid, extent, path, out.labels);
  }
  return out;
}

}  // namespace tessera::io
