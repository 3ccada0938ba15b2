// DICOM SEG output: a label volume over a DICOM series written through create_label_sink and
// read back with DCMTK on routes of its own: frames placed by their Plane Position against the
// geometry VolumeReader reports (not the writer's slice order), source slices found by their
// own Image Position Patient, bits unpacked by hand, colours converted back by DCMTK.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include "dcmtk/config/osconfig.h"
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcfilefo.h"
#include "dcmtk/dcmdata/dcuid.h"
#include "dcmtk/dcmfg/fgderimg.h"
#include "dcmtk/dcmfg/fgfracon.h"
#include "dcmtk/dcmfg/fginterface.h"
#include "dcmtk/dcmfg/fgplanpo.h"
#include "dcmtk/dcmfg/fgseg.h"
#include "dcmtk/dcmiod/cielabutil.h"
#include "dcmtk/dcmseg/segdoc.h"
#include "dcmtk/dcmseg/segment.h"

#include "error_of.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/io/dicom_seg.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/volume.hpp"

namespace tessera::io {
namespace {
namespace fs = std::filesystem;
using test::error_of;

// Unequal axes; 10 x 13 = 130 pixels a frame, not a whole number of bytes, so frames packed
// one after another into the bit stream do not start on byte boundaries.
const Index kExtent{7, 10, 13};  // (z, y, x)

// Right-handed and oblique (a DICOM frame must be), anisotropic, off-origin.
Georeference oblique_geometry() {
  const double a = 20.0 * std::numbers::pi / 180.0, b = 10.0 * std::numbers::pi / 180.0;
  const double ca = std::cos(a), sa = std::sin(a), cb = std::cos(b), sb = std::sin(b);
  // rotation about z by a, then about x by b (row-major; columns are the x, y, z axes)
  Georeference geo;
  geo.direction = {ca, -sa, 0, sa * cb, ca * cb, -sb, sa * sb, ca * sb, cb};
  geo.spacing = {0.7, 0.8, 2.5};
  geo.origin = {-40.5, 22.25, -101.0};
  return geo;
}

std::string get(DcmItem& item, const DcmTagKey& tag, unsigned long pos = 0) {
  OFString v;
  item.findAndGetOFString(tag, v, pos);
  return v.c_str();
}

struct SourceSlice {
  std::array<double, 3> position;
  std::string sop_class_uid, sop_instance_uid;
};

class DicomSeg : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() / ("tessera_dicom_seg_test_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  // A CT series whose file names run against the slice positions (slice_0001.dcm is the last
  // slice), so a writer ordering by name instead of by position shows.
  std::string write_series() {
    const std::string folder = file("ct");
    std::vector<float> hu(static_cast<size_t>(kExtent[0] * kExtent[1] * kExtent[2]));
    for (size_t i = 0; i < hu.size(); ++i) hu[i] = static_cast<float>(i % 200) - 100.0f;
    write_dicom_series(folder, kExtent, oblique_geometry(), hu);
    for (int64_t k = 1; k <= kExtent[0]; ++k)
      fs::rename(fs::path(folder) / ("slice_000" + std::to_string(k) + ".dcm"),
                 fs::path(folder) / ("renamed_" + std::to_string(kExtent[0] + 1 - k) + ".dcm"));
    return folder;
  }

  // Every file of the series read by itself with DCMTK.
  std::vector<SourceSlice> source_slices(const std::string& folder) {
    std::vector<SourceSlice> out;
    for (const auto& e : fs::directory_iterator(folder)) {
      DcmFileFormat f;
      EXPECT_TRUE(f.loadFile(e.path().c_str()).good());
      DcmDataset& d = *f.getDataset();
      SourceSlice s;
      for (unsigned long i = 0; i < 3; ++i) s.position[i] = std::stod(get(d, DCM_ImagePositionPatient, i));
      s.sop_class_uid = get(d, DCM_SOPClassUID);
      s.sop_instance_uid = get(d, DCM_SOPInstanceUID);
      out.push_back(s);
    }
    return out;
  }

  fs::path dir_;
};

int64_t flat(int64_t z, int64_t y, int64_t x) { return (z * kExtent[1] + y) * kExtent[2] + x; }

// Slice 0 empty; a box of class 1 (liver) in slices 1-3; a ball of class 2 (kidney) around
// slice 4 reaching slices 3-5 (it overwrites a corner of the box); nodata in slice 6's corner.
std::vector<uint8_t> known_labels() {
  std::vector<uint8_t> v(static_cast<size_t>(kExtent[0] * kExtent[1] * kExtent[2]), 0);
  for (int64_t z = 1; z <= 3; ++z)
    for (int64_t y = 1; y <= 5; ++y)
      for (int64_t x = 2; x <= 8; ++x) v[flat(z, y, x)] = 1;
  for (int64_t z = 0; z < kExtent[0]; ++z)
    for (int64_t y = 0; y < kExtent[1]; ++y)
      for (int64_t x = 0; x < kExtent[2]; ++x) {
        const double dz = (z - 4.0) * 2.5, dy = (y - 5.0) * 0.8, dx = (x - 7.0) * 0.7;
        if (dz * dz + dy * dy + dx * dx <= 3.2 * 3.2) v[flat(z, y, x)] = 2;
      }
  for (int64_t y = 0; y < 3; ++y)
    for (int64_t x = 0; x < 3; ++x) v[flat(6, y, x)] = kNoDataLabel;
  return v;
}

// Writes `labels` through the sink in two windows (the halves along y).
void write_in_two_windows(LabelSink& sink, const std::vector<uint8_t>& labels) {
  for (int64_t y0 : {int64_t{0}, int64_t{4}}) {
    const int64_t dy = y0 == 0 ? 4 : kExtent[1] - 4;
    Block<uint8_t> block(Index{1, kExtent[0], dy, kExtent[2]});
    for (int64_t z = 0; z < kExtent[0]; ++z)
      for (int64_t y = 0; y < dy; ++y)
        for (int64_t x = 0; x < kExtent[2]; ++x)
          block.data[static_cast<size_t>((z * dy + y) * kExtent[2] + x)] = labels[flat(z, y0 + y, x)];
    sink.write(Box{{0, y0, 0}, {kExtent[0], dy, kExtent[2]}}, block);
  }
}

std::string code_value(CodeSequenceMacro& c) {
  OFString v;
  c.getCodeValue(v);
  return v.c_str();
}

std::string code_scheme(CodeSequenceMacro& c) {
  OFString v;
  c.getCodingSchemeDesignator(v);
  return v.c_str();
}

// Bit i of a frame: byte i / 8, bit i % 8 (PS3.5 8.1.1, least significant bit first).
bool bit(const DcmIODTypes::Frame& frame, size_t i) { return (frame.pixData[i / 8] >> (i % 8)) & 1; }

// The known labels written as a SEG of a written series (named liver and kidney), in two
// windows; each test below reads one part of it.
class WrittenSeg : public DicomSeg {
 protected:
  void SetUp() override {
    DicomSeg::SetUp();
    folder_ = write_series();
    VolumeReader reader(folder_);
    ASSERT_EQ(reader.info().format, "DICOM");
    ASSERT_EQ(reader.info().extent, kExtent);
    geo_ = reader.info().geo;
    labels_ = known_labels();
    out_ = file("out/seg.dcm");
    {
      auto sink =
          create_label_sink(out_, reader.info(), LabelStyle().with_class_names({"background", "liver", "kidney"}));
      write_in_two_windows(*sink, labels_);
      sink->commit();
    }
    ASSERT_TRUE(fs::exists(out_));
  }
  // The segment numbers of classes 1 and 2.
  const std::map<size_t, int> class_of{{1, 1}, {2, 2}};
  std::string folder_, out_;
  Georeference geo_;
  std::vector<uint8_t> labels_;
};

TEST_F(WrittenSeg, SegmentsAreTheNamedCodedColouredClasses) {
  DcmSegmentation* raw = nullptr;
  ASSERT_TRUE(DcmSegmentation::loadFile(out_.c_str(), raw).good());
  std::unique_ptr<DcmSegmentation> seg(raw);
  EXPECT_EQ(seg->getSegmentationType(), DcmSegTypes::ST_BINARY);

  // Segments: class 1 and 2, in that order, named, coded, coloured.
  ASSERT_EQ(seg->getNumberOfSegments(), 2u);
  const std::map<int, std::string> name{{1, "liver"}, {2, "kidney"}};
  const std::map<int, std::string> type_code{{1, "10200004"}, {2, "64033007"}};  // SNOMED CT
  for (const auto& [number, id] : class_of) {
    DcmSegment* s = seg->getSegment(number);
    ASSERT_NE(s, nullptr);
    OFString label, algorithm;
    s->getSegmentLabel(label);
    s->getSegmentAlgorithmName(algorithm);
    EXPECT_EQ(std::string(label.c_str()), name.at(id));
    EXPECT_EQ(s->getSegmentAlgorithmType(), DcmSegTypes::SAT_AUTOMATIC);
    EXPECT_EQ(std::string(algorithm.c_str()), "Tessera U-Net");
    EXPECT_EQ(code_value(s->getSegmentedPropertyCategoryCode()), "91723000");  // Anatomical Structure
    EXPECT_EQ(code_scheme(s->getSegmentedPropertyCategoryCode()), "SCT");
    EXPECT_EQ(code_value(s->getSegmentedPropertyTypeCode()), type_code.at(id));
    EXPECT_EQ(code_scheme(s->getSegmentedPropertyTypeCode()), "SCT");
    Uint16 L = 0, a = 0, b = 0;
    ASSERT_TRUE(s->getRecommendedDisplayCIELabValue(L, a, b).good());
    double r = 0, g = 0, bl = 0;
    IODCIELabUtil::dicomLab2RGB(r, g, bl, L, a, b);  // DCMTK's own conversion back
    const Rgb want = label_color(id);
    EXPECT_NEAR(r * 255, want[0], 2.0) << "class " << id;
    EXPECT_NEAR(g * 255, want[1], 2.0) << "class " << id;
    EXPECT_NEAR(bl * 255, want[2], 2.0) << "class " << id;
  }

}

TEST_F(WrittenSeg, FramesHoldTheLabelsAtTheirSliceAndNameTheSourceSlice) {
  const std::vector<uint8_t>& labels = labels_;
  DcmSegmentation* raw = nullptr;
  ASSERT_TRUE(DcmSegmentation::loadFile(out_.c_str(), raw).good());
  std::unique_ptr<DcmSegmentation> seg(raw);
  EXPECT_EQ(seg->getSegmentationType(), DcmSegTypes::ST_BINARY);

  // Frames: placed by Plane Position against the geometry VolumeReader reports.
  const Georeference& geo = geo_;
  const std::vector<SourceSlice> sources = source_slices(folder_);
  ASSERT_EQ(sources.size(), size_t(kExtent[0]));
  FGInterface& groups = seg->getFunctionalGroups();
  const size_t plane = static_cast<size_t>(kExtent[1] * kExtent[2]);
  std::map<int, std::set<int64_t>> slices_with_frames;
  for (size_t f = 0; f < seg->getNumberOfFrames(); ++f) {
    auto* position = dynamic_cast<FGPlanePosPatient*>(groups.get(Uint32(f), DcmFGTypes::EFG_PLANEPOSPATIENT));
    auto* identification = dynamic_cast<FGSegmentation*>(groups.get(Uint32(f), DcmFGTypes::EFG_SEGMENTATION));
    auto* derivation = dynamic_cast<FGDerivationImage*>(groups.get(Uint32(f), DcmFGTypes::EFG_DERIVATIONIMAGE));
    ASSERT_TRUE(position && identification && derivation) << "frame " << f;
    Uint16 number = 0;
    ASSERT_TRUE(identification->getReferencedSegmentNumber(number).good());
    const int id = class_of.at(number);
    std::array<double, 3> p{};
    for (int i = 0; i < 3; ++i) {
      OFString v;
      ASSERT_TRUE(position->getImagePositionPatient(v, i).good());
      p[size_t(i)] = std::stod(v.c_str());
    }
    // index = D^-1 (p - origin) / spacing; D is orthonormal, so D^-1 = D^T
    std::array<double, 3> index{};
    for (int c = 0; c < 3; ++c) {
      double along = 0;
      for (int r = 0; r < 3; ++r) along += geo.direction[size_t(3 * r + c)] * (p[size_t(r)] - geo.origin[size_t(r)]);
      index[size_t(c)] = along / geo.spacing[size_t(c)];
    }
    EXPECT_NEAR(index[0], 0.0, 1e-3) << "frame " << f;
    EXPECT_NEAR(index[1], 0.0, 1e-3) << "frame " << f;
    const int64_t z = std::llround(index[2]);
    ASSERT_NEAR(index[2], double(z), 1e-3) << "frame " << f;
    ASSERT_TRUE(z >= 0 && z < kExtent[0]) << "frame " << f;
    EXPECT_TRUE(slices_with_frames[id].insert(z).second) << "two frames of class " << id << " at z " << z;

    const DcmIODTypes::Frame* frame = seg->getFrame(f);
    ASSERT_NE(frame, nullptr);
    ASSERT_GE(frame->length * 8, plane);
    int64_t wrong = 0;
    for (int64_t y = 0; y < kExtent[1]; ++y)
      for (int64_t x = 0; x < kExtent[2]; ++x)
        wrong += bit(*frame, size_t(y * kExtent[2] + x)) != (labels[flat(z, y, x)] == id);
    EXPECT_EQ(wrong, 0) << "frame " << f << " (class " << id << ", z " << z << ")";

    // The derivation names the source slice at that position.
    ASSERT_EQ(derivation->getDerivationImageItems().size(), 1u);
    auto& items = derivation->getDerivationImageItems()[0]->getSourceImageItems();
    ASSERT_EQ(items.size(), 1u);
    OFString instance, sop_class, purpose;
    items[0]->getImageSOPInstanceReference().getReferencedSOPInstanceUID(instance);
    items[0]->getImageSOPInstanceReference().getReferencedSOPClassUID(sop_class);
    items[0]->getPurposeOfReferenceCode().getCodeValue(purpose);
    EXPECT_EQ(std::string(purpose.c_str()), "121322");
    const SourceSlice* at = nullptr;
    for (const auto& s : sources)
      if (std::abs(s.position[0] - p[0]) + std::abs(s.position[1] - p[1]) + std::abs(s.position[2] - p[2]) < 1e-3)
        at = &s;
    ASSERT_NE(at, nullptr) << "no source slice at the position of frame " << f;
    EXPECT_EQ(std::string(instance.c_str()), at->sop_instance_uid) << "frame " << f;
    EXPECT_EQ(std::string(sop_class.c_str()), at->sop_class_uid) << "frame " << f;
  }
  // Exactly the slices holding a class have a frame of its segment (empty frames left out).
  for (int id : {1, 2}) {
    std::set<int64_t> holding;
    for (int64_t z = 0; z < kExtent[0]; ++z)
      for (size_t i = 0; i < plane; ++i)
        if (labels[size_t(z) * plane + i] == id) holding.insert(z);
    EXPECT_EQ(slices_with_frames[id], holding) << "class " << id;
  }
  EXPECT_EQ(slices_with_frames[1], (std::set<int64_t>{1, 2, 3}));  // the box, by construction
  EXPECT_EQ(slices_with_frames[2], (std::set<int64_t>{3, 4, 5}));  // the ball, by construction

}

TEST_F(WrittenSeg, HierarchyAndReferencesFollowTheSeries) {
  const std::vector<SourceSlice> sources = source_slices(folder_);
  // Hierarchy and references, read as a plain dataset.
  DcmFileFormat seg_file, ct_file;
  ASSERT_TRUE(seg_file.loadFile(out_.c_str()).good());
  ASSERT_TRUE(ct_file.loadFile(fs::directory_iterator(folder_)->path().c_str()).good());
  DcmDataset& s = *seg_file.getDataset();
  DcmDataset& ct = *ct_file.getDataset();
  EXPECT_EQ(get(s, DCM_Modality), "SEG");
  EXPECT_EQ(get(s, DCM_SOPClassUID), UID_SegmentationStorage);
  EXPECT_EQ(get(s, DCM_SegmentsOverlap), "NO");
  EXPECT_EQ(get(s, DCM_Manufacturer), "Tessera");
  for (const DcmTagKey& tag : {DCM_StudyInstanceUID, DCM_PatientID, DCM_PatientName, DCM_FrameOfReferenceUID}) {
    EXPECT_FALSE(get(ct, tag).empty()) << DcmTag(tag).getTagName();
    EXPECT_EQ(get(s, tag), get(ct, tag)) << DcmTag(tag).getTagName();
  }
  EXPECT_NE(get(s, DCM_SeriesInstanceUID), get(ct, DCM_SeriesInstanceUID));
  DcmItem* series = nullptr;
  ASSERT_TRUE(s.findAndGetSequenceItem(DCM_ReferencedSeriesSequence, series, 0).good());
  EXPECT_EQ(get(*series, DCM_SeriesInstanceUID), get(ct, DCM_SeriesInstanceUID));
  std::set<std::string> referenced, expected;
  DcmItem* instance = nullptr;
  for (long i = 0; series->findAndGetSequenceItem(DCM_ReferencedInstanceSequence, instance, i).good(); ++i) {
    referenced.insert(get(*instance, DCM_ReferencedSOPInstanceUID));
    EXPECT_EQ(get(*instance, DCM_ReferencedSOPClassUID), get(ct, DCM_SOPClassUID));
  }
  for (const auto& src : sources) expected.insert(src.sop_instance_uid);
  EXPECT_EQ(referenced, expected);
}

TEST_F(DicomSeg, ClassesWithoutNamesAreNumberedAndCodedAsTissue) {
  const std::string folder = write_series();
  VolumeReader reader(folder);
  std::vector<uint8_t> labels(static_cast<size_t>(kExtent[0] * kExtent[1] * kExtent[2]), 0);
  labels[flat(2, 3, 4)] = 7;
  const std::string out = file("seg.dcm");
  DicomSegWriter writer(DicomSegOptions(out, folder), kExtent);
  Block<uint8_t> block(Index{1, kExtent[0], kExtent[1], kExtent[2]});
  block.data = labels;
  writer.write(Box{{0, 0, 0}, kExtent}, block);
  writer.commit();

  DcmSegmentation* raw = nullptr;
  ASSERT_TRUE(DcmSegmentation::loadFile(out.c_str(), raw).good());
  std::unique_ptr<DcmSegmentation> seg(raw);
  ASSERT_EQ(seg->getNumberOfSegments(), 1u);
  EXPECT_EQ(seg->getNumberOfFrames(), 1u);
  OFString label;
  seg->getSegment(1)->getSegmentLabel(label);
  EXPECT_EQ(std::string(label.c_str()), "class 7");
  EXPECT_EQ(code_value(seg->getSegment(1)->getSegmentedPropertyCategoryCode()), "85756007");
  EXPECT_EQ(code_value(seg->getSegment(1)->getSegmentedPropertyTypeCode()), "85756007");
}

TEST_F(DicomSeg, RefusesANonDicomInputInOneLine) {
  const std::string nifti = file("ct.nii.gz");
  write_volume(nifti, kExtent, oblique_geometry(), std::vector<float>(size_t(kExtent[0] * kExtent[1] * kExtent[2])),
               true);
  VolumeReader reader(nifti);
  const std::string msg = error_of([&] { create_label_sink(file("seg.dcm"), reader.info()); });
  EXPECT_EQ(msg, file("seg.dcm") + ": a DICOM SEG needs a DICOM series as input; " + nifti + " is NIfTI");
  EXPECT_FALSE(fs::exists(file("seg.dcm")));
}

TEST_F(DicomSeg, RefusesLabelsThatDoNotMatchTheSeriesBeforeAnyVoxel) {
  const std::string folder = write_series();
  const std::string out = file("seg.dcm");
  const std::string slices = error_of([&] { DicomSegWriter(DicomSegOptions(out, folder), {8, 10, 13}); });
  EXPECT_NE(slices.find(out + ": the source series " + folder + " has 7 slices, the labels 8"), std::string::npos)
      << slices;
  const std::string pixels = error_of([&] { DicomSegWriter(DicomSegOptions(out, folder), {7, 13, 10}); });
  EXPECT_NE(pixels.find("is 13 x 10 pixels, the labels 10 x 13"), std::string::npos) << pixels;
  const std::string none = error_of([&] { DicomSegWriter(DicomSegOptions(out, file("empty")), kExtent); });
  EXPECT_EQ(none.rfind(out + ": ", 0), 0u) << none;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(DicomSeg, OnlyBackgroundAndNodataIsRefusedAndLeavesNothing) {
  const std::string folder = write_series();
  const std::string out = file("seg.dcm");
  DicomSegWriter writer(DicomSegOptions(out, folder), kExtent);
  Block<uint8_t> block(Index{1, 1, kExtent[1], kExtent[2]});
  std::fill(block.data.begin(), block.data.end(), kNoDataLabel);
  writer.write(Box{{3, 0, 0}, {1, kExtent[1], kExtent[2]}}, block);
  const std::string msg = error_of([&] { writer.commit(); });
  EXPECT_EQ(msg.rfind(out + ": no DICOM SEG written", 0), 0u) << msg;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1) << "only ct/ is there";
}

TEST_F(DicomSeg, UncommittedWriterLeavesNothing) {
  const std::string folder = write_series();
  {
    DicomSegWriter writer(DicomSegOptions(file("seg.dcm"), folder), kExtent);
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1) << "only ct/ is there";
}

// read_dicom_seg: the SEG the writer made, back on the grid VolumeReader reports (oblique,
// slices named against their order): every voxel's class, the names and colours of the segments.
TEST_F(DicomSeg, ReadBackOntoTheSourceGridVoxelForVoxel) {
  const std::string folder = write_series();
  VolumeReader reader(folder);
  const std::vector<uint8_t> labels = known_labels();
  const std::string out = file("seg.dcm");
  {
    auto sink = create_label_sink(out, reader.info(), LabelStyle().with_class_names({"background", "liver", "kidney"}));
    write_in_two_windows(*sink, labels);
    sink->commit();
  }
  EXPECT_TRUE(is_dicom_seg(out));
  EXPECT_FALSE(is_dicom_seg(reader.info().path + "/renamed_1.dcm"));
  EXPECT_FALSE(is_dicom_seg(file("missing.dcm")));
  const DicomSegLabels seg = read_dicom_seg(out, reader.info().extent, reader.info().geo);
  std::vector<uint8_t> expected = labels;
  std::replace(expected.begin(), expected.end(), kNoDataLabel, uint8_t{0});  // not a segment
  EXPECT_EQ(seg.labels, expected);  // classes 1, 2 are segments 1, 2
  ASSERT_EQ(seg.segments.size(), 2u);
  EXPECT_EQ(seg.segments[0].label, "liver");
  EXPECT_EQ(seg.segments[1].label, "kidney");
  for (int id : {1, 2}) {
    ASSERT_TRUE(seg.segments[size_t(id - 1)].color.has_value());
    for (int c = 0; c < 3; ++c) EXPECT_NEAR((*seg.segments[size_t(id - 1)].color)[size_t(c)], label_color(id)[size_t(c)], 1);
  }
  // The same SEG on a grid half a voxel off, or one slice short: refused, naming the file.
  Georeference shifted = reader.info().geo;
  shifted.origin[0] += 0.5 * shifted.spacing[0] * shifted.direction[0];
  shifted.origin[1] += 0.5 * shifted.spacing[0] * shifted.direction[3];
  shifted.origin[2] += 0.5 * shifted.spacing[0] * shifted.direction[6];
  const std::string off = error_of([&] { read_dicom_seg(out, reader.info().extent, shifted); });
  EXPECT_EQ(off.rfind(out + ": DICOM SEG frame ", 0), 0u) << off;
  EXPECT_NE(off.find("does not lie on the image's voxel grid"), std::string::npos) << off;
  const std::string outside = error_of([&] { read_dicom_seg(out, Index{5, kExtent[1], kExtent[2]}, reader.info().geo); });
  EXPECT_NE(outside.find("reaches outside the image"), std::string::npos) << outside;
  const std::string not_seg = error_of([&] { read_dicom_seg(reader.info().path + "/renamed_1.dcm", kExtent, reader.info().geo); });
  EXPECT_NE(not_seg.find("not a readable DICOM SEG"), std::string::npos) << not_seg;
}

TEST(DicomSegOptions, DefaultsAreValidAndBadFieldsNamed) {
  EXPECT_NO_THROW(DicomSegOptions("seg.dcm", "ct/").validate());
  EXPECT_NE(error_of([] { DicomSegOptions("seg.dcm", "").validate(); }).find("source"), std::string::npos);
  EXPECT_NE(error_of([] { DicomSegOptions("seg.dcm", "ct/").with_algorithm_name("").validate(); }).find("algorithm_name"),
            std::string::npos);
}

TEST(DicomSegCodes, KnownOrgansAreSnomedAnatomyTheRestTissue) {
  EXPECT_EQ(segment_codes("liver").type, (CodedConcept{"10200004", "SCT", "Liver"}));
  EXPECT_EQ(segment_codes("Liver").category.value, "91723000");
  EXPECT_EQ(segment_codes("  Left_Kidney ").type.value, "18639004");
  EXPECT_EQ(segment_codes("spleen").type.value, "78961009");
  EXPECT_EQ(segment_codes("pancreas").type.value, "15776009");
  EXPECT_EQ(segment_codes("tumor").category.value, "49755003");
  EXPECT_EQ(segment_codes("livers").category, (CodedConcept{"85756007", "SCT", "Tissue"}));
  EXPECT_EQ(segment_codes("class 3").type, (CodedConcept{"85756007", "SCT", "Tissue"}));
}

TEST(DicomSegColours, ScaledCielabOfHandWorkedColours) {
  // White: L* 100, a* = b* = 0 -> 65535, 128 * 65535 / 255 = 32896.
  const auto white = dicom_lab_from_srgb(255, 255, 255);
  EXPECT_NEAR(white[0], 65535, 8);
  EXPECT_NEAR(white[1], 32896, 8);
  EXPECT_NEAR(white[2], 32896, 8);
  // sRGB red (D65): L* 53.24, a* 80.09, b* 67.20.
  const auto red = dicom_lab_from_srgb(255, 0, 0);
  EXPECT_NEAR(red[0], 53.24 * 65535 / 100, 30);
  EXPECT_NEAR(red[1], (80.09 + 128) * 65535 / 255, 30);
  EXPECT_NEAR(red[2], (67.20 + 128) * 65535 / 255, 30);
  const auto black = dicom_lab_from_srgb(0, 0, 0);
  EXPECT_EQ(black[0], 0);
}

}  // namespace
}  // namespace tessera::io
