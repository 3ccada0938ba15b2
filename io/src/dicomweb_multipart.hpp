#pragma once
// multipart/related bodies (RFC 2387) as DICOMweb carries instances: WADO-RS answers one part
// per instance, STOW-RS takes them the same way (DICOM PS3.18 8.6.1.2). libcurl builds only
// multipart/form-data, so the framing is written here. Internal to io/.
#include <string>
#include <vector>

namespace tessera::io {

/// The parts' payloads of `body`, framed by the boundary that `content_type` names. Throws
/// tessera::Error when the type is not multipart or the framing is broken.
std::vector<std::string> multipart_parts(const std::string& body, const std::string& content_type);

struct MultipartBody {
  std::string content_type;  ///< multipart/related; type="..."; boundary=...
  std::string body;
};
/// `payloads` framed as multipart/related parts of `part_type`, with a boundary none contains.
MultipartBody multipart_related(const std::vector<std::string>& payloads, const std::string& part_type);

}  // namespace tessera::io
