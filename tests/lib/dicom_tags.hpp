#pragma once
// For tests that need DICOM files Tessera does not write: reading and editing tags of a file
// in place through DCMTK (link DCMTK::dcmdata), a route independent of the GDCM reader.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dcmtk/config/osconfig.h"  // first, as DCMTK asks
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcfilefo.h"

namespace tessera::test {

/// The value of `tag` in `file` (all values, '\'-separated); empty when absent.
inline std::string dicom_tag(const std::string& file, const DcmTagKey& tag) {
  DcmFileFormat f;
  if (f.loadFile(file.c_str()).bad()) throw std::runtime_error(file + ": DCMTK cannot read it");
  OFString v;
  if (f.getDataset()->findAndGetOFStringArray(tag, v).bad()) return {};
  return v.c_str();
}

/// Sets (or adds) each tag of `tags` in `file`, rewriting it in its transfer syntax.
inline void set_dicom_tags(const std::string& file, const std::vector<std::pair<DcmTagKey, std::string>>& tags) {
  DcmFileFormat f;
  if (f.loadFile(file.c_str()).bad()) throw std::runtime_error(file + ": DCMTK cannot read it");
  f.loadAllDataIntoMemory();
  for (const auto& [tag, value] : tags)
    if (f.getDataset()->putAndInsertString(tag, value.c_str()).bad())
      throw std::runtime_error(file + ": DCMTK cannot set a tag to '" + value + "'");
  if (f.saveFile(file.c_str(), f.getDataset()->getOriginalXfer()).bad())
    throw std::runtime_error(file + ": DCMTK cannot write it");
}

}  // namespace tessera::test
