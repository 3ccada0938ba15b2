// The DICOM series of a folder (tessera/io/dicom_series.hpp) and the one a path stands for
// (volume_dicom.hpp): GDCM groups and sorts the files, as ITK's series reader expects; the
// first file's header, read with DCMTK up to the window tags, gives UID, description, modality
// and stored window.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <system_error>

#include <itkGDCMSeriesFileNames.h>

#include "dcmtk/config/osconfig.h"  // first, as DCMTK asks
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcfilefo.h"
#include "dcmtk/oflog/oflog.h"

#include "tessera/core/error.hpp"
#include "tessera/io/dicom_series.hpp"
#include "volume_dicom.hpp"

namespace tessera::io {
namespace fs = std::filesystem;

namespace {

// An element's whole value (all of a multi-valued one, '\\'-separated), DCMTK having removed
// the padding; empty when absent.
std::string tag_string(DcmDataset& ds, const DcmTagKey& tag) {
  OFString v;
  if (ds.findAndGetOFStringArray(tag, v).bad()) return {};
  return v.c_str();
}

// The first value of a decimal string (VR DS, values split by '\\'); nullopt unless a number.
std::optional<double> first_decimal(const std::string& ds) {
  const std::string first = ds.substr(0, ds.find('\\'));
  char* end = nullptr;
  const double v = std::strtod(first.c_str(), &end);
  if (first.empty() || end == first.c_str() || !std::isfinite(v)) return std::nullopt;
  while (*end == ' ') ++end;
  if (*end != '\0') return std::nullopt;
  return v;
}

// The tags of one file, its header read up to the window (not the pixels); fields stay empty
// when it cannot be read.
void read_first_file_tags(const std::string& file, detail::DicomSeriesPart& part) {
  detail::quiet_dcmtk();
  DcmFileFormat header;
  if (header.loadFileUntilTag(file.c_str(), EXS_Unknown, EGL_noChange, DCM_MaxReadLength, ERM_autoDetect,
                              DCM_RescaleIntercept)
          .bad())
    return;
  DcmDataset& ds = *header.getDataset();
  part.summary.uid = tag_string(ds, DCM_SeriesInstanceUID);
  part.summary.description = tag_string(ds, DCM_SeriesDescription);
  part.summary.modality = tag_string(ds, DCM_Modality);
  const auto center = first_decimal(tag_string(ds, DCM_WindowCenter));
  const auto width = first_decimal(tag_string(ds, DCM_WindowWidth));
  if (center && width && *width > 0) part.window = DisplayWindow{*center, *width};
}

// One summary per UID, slices counted over its groups; ordered by UID.
std::vector<DicomSeriesSummary> merge_by_uid(const std::vector<detail::DicomSeriesPart>& parts) {
  std::vector<DicomSeriesSummary> out;
  for (const auto& p : parts) {
    if (!out.empty() && out.back().uid == p.summary.uid) {
      out.back().slices += p.summary.slices;
    } else {
      out.push_back(p.summary);
    }
  }
  return out;
}

std::string describe_all(const std::vector<DicomSeriesSummary>& series) {
  std::string s;
  for (const auto& one : series) s += (s.empty() ? "" : "; ") + describe(one);
  return s;
}

// "; 3 of its 5 files: the others differ in size, slice thickness or series number" when the
// UID's files fell into several groups and only `part` is read.
std::string partial_note(const std::vector<detail::DicomSeriesPart>& parts, const detail::DicomSeriesPart& part) {
  int64_t all = 0;
  for (const auto& p : parts)
    if (p.summary.uid == part.summary.uid) all += p.summary.slices;
  if (all == part.summary.slices) return {};
  return "; " + std::to_string(part.summary.slices) + " of its " + std::to_string(all) +
         " files: the others differ in size, slice thickness or series number";
}

detail::ChosenDicomSeries chosen(const detail::DicomSeriesPart& part, std::string how,
                                 const std::vector<detail::DicomSeriesPart>& parts, std::string reopen_path) {
  detail::ChosenDicomSeries c;
  c.files = part.files;
  c.summary.series = part.summary;
  c.summary.how = std::move(how) + partial_note(parts, part);
  c.summary.window = part.window;
  c.reopen_path = std::move(reopen_path);
  return c;
}

detail::ChosenDicomSeries choose_in_folder(const std::string& folder, const std::string& series_uid) {
  const auto parts = detail::dicom_series_parts(folder);
  if (parts.empty()) detail::fail(folder, "no DICOM series found");
  const auto series = merge_by_uid(parts);
  if (series_uid.empty() && series.size() > 1)
    detail::fail(folder, "holds " + std::to_string(series.size()) +
                             " DICOM series; choose one by its UID (--series UID): " + describe_all(series));
  const std::string uid = series_uid.empty() ? series.front().uid : series_uid;
  const auto part = std::find_if(parts.begin(), parts.end(), [&](const auto& p) { return p.summary.uid == uid; });
  if (part == parts.end())
    detail::fail(folder, "holds no DICOM series " + uid + "; it holds " + describe_all(series));
  if (series.size() == 1) return chosen(*part, "the only series in the folder", parts, folder);
  // Reopened without the UID, the folder would be refused: the series' first file stands for it.
  return chosen(*part, "chosen among the " + std::to_string(series.size()) + " series in the folder", parts,
                part->files.front());
}

detail::ChosenDicomSeries choose_for_file(const std::string& file, const std::string& series_uid) {
  const auto parts = detail::dicom_series_parts(fs::absolute(file).parent_path().string());
  const auto part = std::find_if(parts.begin(), parts.end(), [&](const auto& p) {
    return std::any_of(p.files.begin(), p.files.end(), [&](const std::string& f) {
      std::error_code ec;
      return fs::equivalent(f, file, ec);
    });
  });
  if (part == parts.end()) detail::fail(file, "no DICOM series found");
  if (!series_uid.empty() && series_uid != part->summary.uid)
    detail::fail(file, "belongs to DICOM series " + part->summary.uid + ", not " + series_uid);
  const std::string how = part->files.size() > 1
                              ? "the whole series, from the files beside " + fs::path(file).filename().string()
                              : "this file alone, a one-slice volume: no other file of its series beside it";
  return chosen(*part, how, parts, file);
}

}  // namespace

bool is_dicom_uid(const std::string& uid) {
  const bool digits_and_dots =
      std::all_of(uid.begin(), uid.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
  return digits_and_dots && !uid.empty() && uid.size() <= 64 && uid.front() != '.' && uid.back() != '.';
}

void ImageOpenOptions::validate() const {
  if (series_uid.empty()) return;
  if (!is_dicom_uid(series_uid))
    throw Error("series_uid '" + series_uid + "': a DICOM UID is digits and dots, at most 64 characters");
}

std::vector<DicomSeriesSummary> list_dicom_series(const std::string& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) throw Error(folder + ": not a folder");
  try {
    return merge_by_uid(detail::dicom_series_parts(folder));
  } catch (const itk::ExceptionObject& e) {
    detail::fail(folder, "cannot list DICOM series: " + detail::short_reason(e));
  }
}

std::string describe(const DicomSeriesSummary& series) {
  std::string details;
  const auto add = [&](const std::string& s) { details += (details.empty() ? "" : ", ") + s; };
  if (!series.modality.empty()) add(series.modality);
  if (!series.description.empty()) add("\"" + series.description + "\"");
  add(std::to_string(series.slices) + (series.slices == 1 ? " slice" : " slices"));
  return (series.uid.empty() ? std::string("(no series UID)") : series.uid) + " (" + details + ")";
}

namespace detail {

void quiet_dcmtk() {
  static const bool once = [] {
    OFLog::configure(OFLogger::FATAL_LOG_LEVEL);
    return true;
  }();
  (void)once;
}

std::vector<DicomSeriesPart> dicom_series_parts(const std::string& folder) {
  auto names = itk::GDCMSeriesFileNames::New();
  names->SetUseSeriesDetails(true);
  names->SetDirectory(folder);
  std::vector<DicomSeriesPart> parts;
  for (const auto& id : names->GetSeriesUIDs()) {
    DicomSeriesPart part;
    part.files = names->GetFileNames(id);
    if (part.files.empty()) continue;
    part.summary.slices = static_cast<int64_t>(part.files.size());
    read_first_file_tags(part.files.front(), part);
    parts.push_back(std::move(part));
  }
  std::stable_sort(parts.begin(), parts.end(), [](const DicomSeriesPart& a, const DicomSeriesPart& b) {
    if (a.summary.uid != b.summary.uid) return a.summary.uid < b.summary.uid;
    return a.files.size() > b.files.size();
  });
  return parts;
}

ChosenDicomSeries choose_dicom_series(const std::string& path, const std::string& series_uid) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return choose_in_folder(path, series_uid);
  return choose_for_file(path, series_uid);
}

}  // namespace detail
}  // namespace tessera::io
