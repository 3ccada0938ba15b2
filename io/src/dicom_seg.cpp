// DicomSegWriter: a label volume as a DICOM SEG through DCMTK (dcmseg/dcmfg/dcmiod), with the
// slices of the source series in the order VolumeReader reads them (volume_dicom.hpp). See
// tessera/io/dicom_seg.hpp for what the file holds.
#include "tessera/io/dicom_seg.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string_view>

#include "dcmtk/config/osconfig.h"  // first, as DCMTK asks
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcfilefo.h"
#include "dcmtk/dcmdata/dcuid.h"
#include "dcmtk/dcmdata/dcvrda.h"
#include "dcmtk/dcmdata/dcvrtm.h"
#include "dcmtk/dcmfg/fgderimg.h"
#include "dcmtk/dcmfg/fgfracon.h"
#include "dcmtk/dcmfg/fgpixmsr.h"
#include "dcmtk/dcmfg/fgplanor.h"
#include "dcmtk/dcmfg/fgplanpo.h"
#include "dcmtk/dcmiod/iodmacro.h"
#include "dcmtk/dcmseg/segdoc.h"
#include "dcmtk/dcmseg/segment.h"

#include "tessera/core/colors.hpp"
#include "tessera/core/error.hpp"
#include "tessera/run/staged_file.hpp"
#include "volume_dicom.hpp"

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "unknown"
#endif

namespace tessera::io {

// ---- codes and colours ------------------------------------------------------------------

namespace {

const CodedConcept kAnatomicalStructure{"91723000", "SCT", "Anatomical Structure"};
const CodedConcept kAbnormalStructure{"49755003", "SCT", "Morphologically Abnormal Structure"};
const CodedConcept kTissue{"85756007", "SCT", "Tissue"};

struct KnownClass {
  std::string_view name;  // lower case, words separated by one space
  CodedConcept type;
  bool abnormal = false;  // category Morphologically Abnormal Structure, not Anatomical Structure
};

// SNOMED CT concepts of DICOM CID 7166 / 7151 for the structures abdominal CT models segment.
const KnownClass kKnownClasses[] = {
    {"liver", {"10200004", "SCT", "Liver"}},
    {"kidney", {"64033007", "SCT", "Kidney"}},
    {"left kidney", {"18639004", "SCT", "Left kidney"}},
    {"right kidney", {"9846003", "SCT", "Right kidney"}},
    {"spleen", {"78961009", "SCT", "Spleen"}},
    {"pancreas", {"15776009", "SCT", "Pancreas"}},
    {"gallbladder", {"28231008", "SCT", "Gallbladder"}},
    {"stomach", {"69695003", "SCT", "Stomach"}},
    {"esophagus", {"32849002", "SCT", "Esophagus"}},
    {"duodenum", {"38848004", "SCT", "Duodenum"}},
    {"small intestine", {"30315005", "SCT", "Small intestine"}},
    {"colon", {"71854001", "SCT", "Colon"}},
    {"urinary bladder", {"89837001", "SCT", "Urinary bladder"}},
    {"bladder", {"89837001", "SCT", "Urinary bladder"}},
    {"prostate", {"41216001", "SCT", "Prostate"}},
    {"adrenal gland", {"23451007", "SCT", "Adrenal gland"}},
    {"aorta", {"15825003", "SCT", "Aorta"}},
    {"inferior vena cava", {"64131007", "SCT", "Inferior vena cava"}},
    {"portal vein", {"32764006", "SCT", "Portal vein"}},
    {"heart", {"80891009", "SCT", "Heart"}},
    {"lung", {"39607008", "SCT", "Lung"}},
    {"brain", {"12738006", "SCT", "Brain"}},
    {"bone", {"272673000", "SCT", "Bone"}},
    {"tumor", {"108369006", "SCT", "Neoplasm"}, true},
    {"tumour", {"108369006", "SCT", "Neoplasm"}, true},
    {"neoplasm", {"108369006", "SCT", "Neoplasm"}, true},
    {"lesion", {"52988006", "SCT", "Lesion"}, true},
};

// Lower case, '_' and '-' as spaces, runs of spaces as one, no leading or trailing space.
std::string normalized_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    const char k = (c == '_' || c == '-') ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (k == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += k;
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

SegmentCodes segment_codes(const std::string& class_name) {
  const std::string key = normalized_name(class_name);
  for (const auto& known : kKnownClasses)
    if (known.name == key) return {known.abnormal ? kAbnormalStructure : kAnatomicalStructure, known.type};
  return {kTissue, kTissue};
}

std::array<uint16_t, 3> dicom_lab_from_srgb(uint8_t r, uint8_t g, uint8_t b) {
  // sRGB -> linear -> CIE XYZ (D65) -> CIELab (D65 white), then PS3.3 C.10.7.1.1's scaling.
  const auto linear = [](uint8_t v) {
    const double c = v / 255.0;
    return c > 0.04045 ? std::pow((c + 0.055) / 1.055, 2.4) : c / 12.92;
  };
  const double lr = linear(r), lg = linear(g), lb = linear(b);
  const double x = (0.4124 * lr + 0.3576 * lg + 0.1805 * lb) / 0.95047;
  const double y = 0.2126 * lr + 0.7152 * lg + 0.0722 * lb;
  const double z = (0.0193 * lr + 0.1192 * lg + 0.9505 * lb) / 1.08883;
  const auto f = [](double t) { return t > 0.008856 ? std::cbrt(t) : 7.787 * t + 16.0 / 116.0; };
  const double L = 116.0 * f(y) - 16.0, A = 500.0 * (f(x) - f(y)), B = 200.0 * (f(y) - f(z));
  const auto scaled = [](double v) { return static_cast<uint16_t>(std::lround(std::clamp(v, 0.0, 65535.0))); };
  return {scaled(L * 65535.0 / 100.0), scaled((A + 128.0) * 65535.0 / 255.0), scaled((B + 128.0) * 65535.0 / 255.0)};
}

void DicomSegOptions::validate() const {
  if (path.empty()) throw Error("dicom seg: path is empty");
  if (source.empty()) throw Error(path + ": dicom seg source is empty (the DICOM series the labels come from)");
  if (algorithm_name.empty()) throw Error(path + ": dicom seg algorithm_name is empty (AUTOMATIC segments need one)");
  if (algorithm_name.size() > 64) throw Error(path + ": dicom seg algorithm_name is longer than 64 characters");
  if (series_description.size() > 64) throw Error(path + ": dicom seg series_description is longer than 64 characters");
}

// ---- the source series ------------------------------------------------------------------

namespace detail {

// The headers of the source series the SEG references (no pixel data).
struct DicomSegSource {
  struct Slice {
    std::string file;
    std::string sop_class_uid;
    std::string sop_instance_uid;
    std::array<std::string, 3> position;  // Image Position Patient, as stored
  };
  std::vector<Slice> slices;               // Tessera's z order
  std::string series_uid;
  std::string body_part;                   // Body Part Examined; may be empty
  std::array<std::string, 6> orientation;  // Image Orientation Patient, as stored
  std::string pixel_spacing;               // row spacing \ column spacing, as stored
  std::string slice_thickness;             // as stored, else the spacing between slices
  std::string spacing_between_slices;      // along the normal, from the positions; may be empty
  std::string lossy_compression, lossy_ratio, lossy_method;
};

}  // namespace detail

namespace {
using detail::DicomSegSource;

// DICOM's decimal strings (VR DS) hold at most 16 characters.
std::string decimal_string(double v) {
  if (std::abs(v) < 1e-12) v = 0.0;
  char buf[32];
  for (int precision = 12; precision > 0; --precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::string_view(buf).size() <= 16) break;
  }
  return buf;
}

// Throws "<path>: cannot write DICOM SEG: <what>: <DCMTK's reason>" unless `c` is good.
void check(const OFCondition& c, const std::string& path, const std::string& what) {
  if (c.good()) return;
  throw Error(path + ": cannot write DICOM SEG: " + what + ": " + (c.text() ? c.text() : "DCMTK error"));
}

std::string get_string(DcmItem& d, const DcmTagKey& tag, unsigned long pos = 0) {
  OFString v;
  if (d.findAndGetOFString(tag, v, pos).bad()) return {};
  return v.c_str();
}

std::string get_strings(DcmItem& d, const DcmTagKey& tag) {
  OFString v;
  if (d.findAndGetOFStringArray(tag, v).bad()) return {};
  return v.c_str();
}

// The files of the series `source` names, in the order VolumeReader reads them (`source` is
// the reader's ImageInfo::path, which names a series chosen among several by its first file).
std::vector<std::string> series_files(const std::string& source) {
  return detail::choose_dicom_series(source, "").files;
}

template <size_t N>
std::array<double, N> numbers(const std::array<std::string, N>& s) {
  std::array<double, N> v{};
  for (size_t i = 0; i < N; ++i) v[i] = std::atof(s[i].c_str());
  return v;
}

// One source file's header, checked against the labels' rows and columns.
DicomSegSource::Slice read_slice(const std::string& file, const std::string& out, const Index& extent,
                                 DcmFileFormat& header) {
  const OFCondition loaded = header.loadFile(file.c_str());
  if (loaded.bad()) throw Error(out + ": cannot read the source slice " + file + ": " + loaded.text());
  DcmDataset& d = *header.getDataset();
  DicomSegSource::Slice s;
  s.file = file;
  s.sop_class_uid = get_string(d, DCM_SOPClassUID);
  s.sop_instance_uid = get_string(d, DCM_SOPInstanceUID);
  for (unsigned long i = 0; i < 3; ++i) s.position[i] = get_string(d, DCM_ImagePositionPatient, i);
  Uint16 rows = 0, columns = 0;
  d.findAndGetUint16(DCM_Rows, rows);
  d.findAndGetUint16(DCM_Columns, columns);
  if (s.sop_class_uid.empty() || s.sop_instance_uid.empty())
    throw Error(out + ": the source slice " + file + " has no SOP Class or Instance UID");
  if (s.position[2].empty()) throw Error(out + ": the source slice " + file + " has no Image Position Patient");
  if (rows != extent[1] || columns != extent[2])
    throw Error(out + ": the source slice " + file + " is " + std::to_string(columns) + " x " + std::to_string(rows) +
                " pixels, the labels " + std::to_string(extent[2]) + " x " + std::to_string(extent[1]));
  return s;
}

// The series-wide attributes, from the first slice; spacing between slices from the positions.
void read_series_attributes(DcmDataset& first, const std::string& out, DicomSegSource& src) {
  src.series_uid = get_string(first, DCM_SeriesInstanceUID);
  src.body_part = get_string(first, DCM_BodyPartExamined);
  for (unsigned long i = 0; i < 6; ++i) src.orientation[i] = get_string(first, DCM_ImageOrientationPatient, i);
  src.pixel_spacing = get_strings(first, DCM_PixelSpacing);
  src.slice_thickness = get_string(first, DCM_SliceThickness);
  src.lossy_compression = get_string(first, DCM_LossyImageCompression);
  src.lossy_ratio = get_strings(first, DCM_LossyImageCompressionRatio);
  src.lossy_method = get_strings(first, DCM_LossyImageCompressionMethod);
  if (src.orientation[5].empty() || src.pixel_spacing.empty())
    throw Error(out + ": the source series has no Image Orientation Patient or Pixel Spacing");
  const auto o = numbers(src.orientation);
  const std::array<double, 3> normal{o[1] * o[5] - o[2] * o[4], o[2] * o[3] - o[0] * o[5], o[0] * o[4] - o[1] * o[3]};
  if (src.slices.size() > 1) {
    const auto a = numbers(src.slices.front().position), b = numbers(src.slices.back().position);
    double along = 0.0;
    for (int i = 0; i < 3; ++i) along += (b[i] - a[i]) * normal[i];
    src.spacing_between_slices = decimal_string(std::abs(along) / static_cast<double>(src.slices.size() - 1));
  }
  if (src.slice_thickness.empty()) src.slice_thickness = src.spacing_between_slices;
}

std::unique_ptr<DicomSegSource> read_source(const DicomSegOptions& o, const Index& extent) {
  std::vector<std::string> files;
  try {
    files = series_files(o.source);
  } catch (const itk::ExceptionObject& e) {
    throw Error(o.path + ": cannot read the source series " + o.source + ": " + detail::short_reason(e));
  } catch (const Error& e) {  // "<source>: no DICOM series found", several series, ...
    throw Error(o.path + ": the source: " + e.what());
  }
  if (static_cast<int64_t>(files.size()) != extent[0])
    throw Error(o.path + ": the source series " + o.source + " has " + std::to_string(files.size()) +
                " slices, the labels " + std::to_string(extent[0]));
  auto src = std::make_unique<DicomSegSource>();
  DcmFileFormat first;
  std::array<double, 6> orientation{};
  for (size_t k = 0; k < files.size(); ++k) {
    DcmFileFormat other;
    DcmFileFormat& header = k == 0 ? first : other;
    src->slices.push_back(read_slice(files[k], o.path, extent, header));
    std::array<std::string, 6> stored;
    for (unsigned long i = 0; i < 6; ++i) stored[i] = get_string(*header.getDataset(), DCM_ImageOrientationPatient, i);
    const std::array<double, 6> here = numbers(stored);
    if (k == 0) orientation = here;
    for (size_t i = 0; i < 6; ++i)
      if (std::abs(here[i] - orientation[i]) > 1e-4)
        throw Error(o.path + ": the source slices differ in Image Orientation Patient (" + files[k] + ")");
  }
  read_series_attributes(*first.getDataset(), o.path, *src);
  return src;
}

// ---- building the SEG -------------------------------------------------------------------

CodeSequenceMacro code(const CodedConcept& c) { return CodeSequenceMacro(c.value.c_str(), c.scheme.c_str(), c.meaning.c_str()); }

// A Long String (LO): at most 64 characters, no backslash.
std::string long_string(std::string s) {
  std::replace(s.begin(), s.end(), '\\', '/');
  if (s.size() > 64) s.resize(64);
  return s;
}

std::string class_name(const DicomSegOptions& o, int id) {
  if (id >= 0 && static_cast<size_t>(id) < o.class_names.size() && !o.class_names[size_t(id)].empty())
    return o.class_names[size_t(id)];
  return "class " + std::to_string(id);
}

// The class ids present, except background and nodata, increasing.
std::vector<int> present_classes(const std::vector<uint8_t>& labels) {
  std::array<bool, 256> seen{};
  for (uint8_t v : labels) seen[v] = true;
  std::vector<int> ids;
  for (int id = 1; id < 255; ++id)
    if (seen[size_t(id)]) ids.push_back(id);
  return ids;
}

// The document with everything but segments, frames and references: patient, study and frame
// of reference from the source, Tessera as equipment, the two dimensions, the shared groups.
std::unique_ptr<DcmSegmentation> new_segmentation(const DicomSegOptions& o, const DicomSegSource& src,
                                                  const Index& extent) {
  const std::string& out = o.path;
  const IODGeneralEquipmentModule::EquipmentInfo equipment("Tessera", "Tessera", "1", TESSERA_VERSION);
  // Content Creator's Name is a person's (PN); no person made this one.
  const ContentIdentificationMacro content("1", "TESSERA_SEG", long_string(o.series_description).c_str(), "");
  DcmSegmentation* raw = nullptr;
  check(DcmSegmentation::createBinarySegmentation(raw, static_cast<Uint16>(extent[1]), static_cast<Uint16>(extent[2]),
                                                  equipment, content),
        out, "creating the segmentation");
  std::unique_ptr<DcmSegmentation> doc(raw);

  // Patient, study (which also reads the scanner's equipment) and frame of reference.
  check(doc->importHierarchy(src.slices.front().file.c_str(), OFTrue, OFTrue, OFTrue, OFFalse), out,
        "importing patient and study from " + src.slices.front().file);
  doc->getEquipment().clearData();  // the SEG's equipment is what made it
  check(doc->setEquipmentInfo(equipment), out, "equipment");
  OFString frame_of_reference;
  if (doc->getFrameOfReference().getFrameOfReferenceUID(frame_of_reference).bad() || frame_of_reference.empty()) {
    char uid[100];
    check(doc->getFrameOfReference().setFrameOfReferenceUID(dcmGenerateUniqueIdentifier(uid, SITE_INSTANCE_UID_ROOT)),
          out, "frame of reference");
  }
  if (src.lossy_compression == "01")
    check(doc->setLossyImageCompressionFlag(src.lossy_ratio.c_str(), src.lossy_method.c_str(), OFFalse), out,
          "lossy compression flag");

  char organization[100];
  dcmGenerateUniqueIdentifier(organization, SITE_INSTANCE_UID_ROOT);
  IODMultiframeDimensionModule& dimensions = doc->getDimensions();
  check(dimensions.addDimensionIndex(DCM_ReferencedSegmentNumber, organization, DCM_SegmentIdentificationSequence,
                                     "ReferencedSegmentNumber"),
        out, "dimension index");
  check(dimensions.addDimensionIndex(DCM_ImagePositionPatient, organization, DCM_PlanePositionSequence,
                                     "ImagePositionPatient"),
        out, "dimension index");

  const auto& r = src.orientation;
  std::unique_ptr<FGPlaneOrientationPatient> orientation(
      FGPlaneOrientationPatient::createMinimal(r[0].c_str(), r[1].c_str(), r[2].c_str(), r[3].c_str(), r[4].c_str(),
                                               r[5].c_str()));
  if (!orientation) throw Error(out + ": cannot write DICOM SEG: bad Image Orientation Patient in the source");
  check(doc->addForAllFrames(*orientation), out, "plane orientation");
  FGPixelMeasures measures;
  check(measures.setPixelSpacing(src.pixel_spacing.c_str()), out, "pixel spacing");
  if (!src.slice_thickness.empty()) check(measures.setSliceThickness(src.slice_thickness.c_str()), out, "slice thickness");
  if (!src.spacing_between_slices.empty())
    check(measures.setSpacingBetweenSlices(src.spacing_between_slices.c_str()), out, "spacing between slices");
  check(doc->addForAllFrames(measures), out, "pixel measures");
  return doc;
}

Uint16 add_segment(DcmSegmentation& doc, const DicomSegOptions& o, int id) {
  const std::string name = class_name(o, id);
  const SegmentCodes codes = segment_codes(name);
  DcmSegment* raw = nullptr;
  check(DcmSegment::create(raw, long_string(name).c_str(), code(codes.category), code(codes.type),
                           DcmSegTypes::SAT_AUTOMATIC, long_string(o.algorithm_name).c_str()),
        o.path, "segment " + name);
  std::unique_ptr<DcmSegment> segment(raw);
  const Rgb rgb = class_color(o.class_colors, id);
  const auto lab = dicom_lab_from_srgb(rgb[0], rgb[1], rgb[2]);
  check(segment->setRecommendedDisplayCIELabValue(lab[0], lab[1], lab[2]), o.path, "segment colour");
  Uint16 number = 0;
  check(doc.addSegment(segment.get(), number), o.path, "segment " + name);
  segment.release();  // the document owns it now
  return number;
}

// The frames of class `id` (segment `number`): one per slice holding the class, z increasing.
void add_frames(DcmSegmentation& doc, const DicomSegOptions& o, Uint16 number, int id,
                const std::vector<uint8_t>& labels, const Index& extent, const DicomSegSource& src) {
  const size_t plane = static_cast<size_t>(extent[1] * extent[2]);
  std::vector<Uint8> frame(plane);
  std::unique_ptr<FGPlanePosPatient> position(FGPlanePosPatient::createMinimal("0", "0", "0"));
  FGFrameContent content;
  FGDerivationImage derivation;
  const OFVector<FGBase*> groups{position.get(), &content, &derivation};
  for (size_t z = 0; z < src.slices.size(); ++z) {
    const auto slice = labels.begin() + static_cast<std::ptrdiff_t>(z * plane);
    bool any = false;
    for (size_t i = 0; i < plane; ++i) any |= (frame[i] = slice[static_cast<std::ptrdiff_t>(i)] == id ? 1 : 0) != 0;
    if (!any) continue;  // dcmqi's choice too: a segment lists the slices it touches
    const DicomSegSource::Slice& s = src.slices[z];
    check(position->setImagePositionPatient(s.position[0].c_str(), s.position[1].c_str(), s.position[2].c_str()),
          o.path, "plane position of " + s.file);
    check(content.setDimensionIndexValues(number, 0), o.path, "frame content");
    check(content.setDimensionIndexValues(static_cast<Uint32>(z + 1), 1), o.path, "frame content");
    derivation.clearData();
    DerivationImageItem* item = nullptr;
    check(derivation.addDerivationImageItem(CodeSequenceMacro("113076", "DCM", "Segmentation"), "", item), o.path,
          "derivation image");
    auto source_item = std::make_unique<SourceImageItem>();
    check(source_item->getPurposeOfReferenceCode().set("121322", "DCM", "Source image for image processing operation"),
          o.path, "source image");
    check(source_item->getImageSOPInstanceReference().setReferencedSOPClassUID(s.sop_class_uid.c_str()), o.path,
          "source image of " + s.file);
    check(source_item->getImageSOPInstanceReference().setReferencedSOPInstanceUID(s.sop_instance_uid.c_str()), o.path,
          "source image of " + s.file);
    item->getSourceImageItems().push_back(source_item.release());
    check(doc.addFrame(frame.data(), number, groups), o.path, "frame " + std::to_string(z) + " of segment " +
                                                                   std::to_string(number));
  }
}

// Referenced Series Sequence: every instance of the source series.
void add_series_reference(DcmSegmentation& doc, const DicomSegOptions& o, const DicomSegSource& src) {
  auto series = std::make_unique<IODSeriesAndInstanceReferenceMacro::ReferencedSeriesItem>();
  check(series->setSeriesInstanceUID(src.series_uid.c_str()), o.path, "referenced series");
  for (const auto& s : src.slices) {
    auto instance = std::make_unique<SOPInstanceReferenceMacro>();
    check(instance->setReferencedSOPClassUID(s.sop_class_uid.c_str()), o.path, "referenced instance " + s.file);
    check(instance->setReferencedSOPInstanceUID(s.sop_instance_uid.c_str()), o.path, "referenced instance " + s.file);
    series->getReferencedInstanceItems().push_back(instance.release());
  }
  doc.getCommonInstanceReference().getReferencedSeriesItems().push_back(series.release());
}

// Series and content: a new series of the source's study, made now.
void describe(DcmSegmentation& doc, const DicomSegOptions& o) {
  OFString date, time;
  DcmDate::getCurrentDate(date);
  DcmTime::getCurrentTime(time);
  check(doc.getSeries().setSeriesNumber("1000"), o.path, "series number");
  check(doc.getSeries().setSeriesDescription(long_string(o.series_description).c_str()), o.path, "series description");
  check(doc.getSeries().setSeriesDate(date), o.path, "series date");
  check(doc.getSeries().setSeriesTime(time), o.path, "series time");
  check(doc.getGeneralImage().setContentDate(date), o.path, "content date");
  check(doc.getGeneralImage().setContentTime(time), o.path, "content time");
}

void save(DcmSegmentation& doc, const DicomSegOptions& o, const DicomSegSource& src) {
  DcmFileFormat file;
  DcmDataset& d = *file.getDataset();
  check(doc.writeDataset(d), o.path, "building the dataset");
  check(d.putAndInsertString(DCM_SegmentsOverlap, "NO"), o.path, "segments overlap");  // one label per voxel
  if (!src.body_part.empty()) check(d.putAndInsertString(DCM_BodyPartExamined, src.body_part.c_str()), o.path, "body part");
  StagedFile staged(o.path, ".dcm");
  check(file.saveFile(staged.path().c_str(), EXS_LittleEndianExplicit), o.path, "saving");
  staged.commit();
}

}  // namespace

// ---- DicomSegWriter ---------------------------------------------------------------------

DicomSegWriter::DicomSegWriter(DicomSegOptions options, Index extent)
    : options_(std::move(options)), extent_(std::move(extent)) {
  options_.validate();
  detail::check_volume_extent(extent_);
  if (extent_[1] > 65535 || extent_[2] > 65535)
    throw Error(options_.path + ": a DICOM SEG frame holds at most 65535 x 65535 pixels");
  detail::quiet_dcmtk();
  source_ = read_source(options_, extent_);
  labels_.assign(static_cast<size_t>(detail::voxel_count(extent_)), 0);
}

// Uncommitted, nothing was written (the file is made only by commit()).
DicomSegWriter::~DicomSegWriter() = default;

void DicomSegWriter::write(const Box& box, const Block<uint8_t>& labels) {
  TESSERA_CHECK(!committed_);
  detail::paste_labels(labels_, extent_, box, labels);
}

void DicomSegWriter::commit() {
  TESSERA_CHECK(!committed_);
  const std::vector<int> ids = present_classes(labels_);
  if (ids.empty())
    throw Error(options_.path + ": no DICOM SEG written: every voxel is background (0) or nodata (255), "
                "and a SEG needs at least one segment");
  std::unique_ptr<DcmSegmentation> doc = new_segmentation(options_, *source_, extent_);
  for (int id : ids) add_frames(*doc, options_, add_segment(*doc, options_, id), id, labels_, extent_, *source_);
  add_series_reference(*doc, options_, *source_);
  describe(*doc, options_);
  save(*doc, options_, *source_);
  committed_ = true;
}

}  // namespace tessera::io
