// DICOMweb addresses and the multipart/related framing (io/src/dicomweb_multipart.hpp); the
// HTTP exchange with a real PACS is tests/cli/pacs_dicomweb.sh (Orthanc).
#include "tessera/io/dicomweb.hpp"

#include <gtest/gtest.h>

#include "dicomweb_multipart.hpp"
#include "tessera/core/error.hpp"

namespace tessera::io {
namespace {

std::string error_of(const std::string& address) {
  try {
    parse_dicomweb(address, "--input");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DicomWebAddress, SplitsServiceRootStudyAndSeries) {
  const auto a = parse_dicomweb("dicomweb://pacs.example.org:8042/dicom-web/studies/1.2.3/series/1.2.3.4", "--input");
  EXPECT_EQ(a.base, "http://pacs.example.org:8042/dicom-web");
  EXPECT_EQ(a.study, "1.2.3");
  EXPECT_EQ(a.series, "1.2.3.4");
  const auto root = parse_dicomweb("dicomwebs://pacs/dcm4chee-arc/aets/DCM4CHEE/rs", "--store");
  EXPECT_EQ(root.base, "https://pacs/dcm4chee-arc/aets/DCM4CHEE/rs");
  EXPECT_EQ(root.study, "");
  EXPECT_EQ(root.series, "");
  EXPECT_TRUE(is_dicomweb("dicomwebs://h/x"));
  EXPECT_FALSE(is_dicomweb("/data/dicomweb://x"));
}

TEST(DicomWebAddress, RefusesWhatIsNotAnAddressNamingTheFlag) {
  EXPECT_NE(error_of("dicomweb://user:pw@pacs/dicom-web").find("--input dicomweb://user:pw@pacs/dicom-web: expected"),
            std::string::npos);
  EXPECT_NE(error_of("dicomweb://pacs:99999/dicom-web").find("port '99999'"), std::string::npos);
  EXPECT_NE(error_of("dicomweb://pacs/dicom-web/studies/1.2/series").find("expected .../studies/"), std::string::npos);
  EXPECT_NE(error_of("dicomweb://pacs/dicom-web/studies/1.2/series/1.2.a").find("not a DICOM UID"), std::string::npos);
  EXPECT_NE(error_of("dicomweb:///dicom-web").find("expected dicomweb://HOST"), std::string::npos);
}

TEST(Multipart, PartsComeBackAsFramed) {
  const std::vector<std::string> payloads = {std::string("DICM\0\r\n--x\r\n", 12), "", "\r\n\r\nlast"};
  const MultipartBody m = multipart_related(payloads, "application/dicom");
  EXPECT_EQ(m.content_type.rfind("multipart/related; type=\"application/dicom\"; boundary=", 0), 0u);
  EXPECT_EQ(multipart_parts(m.body, m.content_type), payloads);
}

TEST(Multipart, ReadsAQuotedBoundaryAndPartHeaders) {
  const std::string body =
      "preamble\r\n--b1\r\nContent-Type: application/dicom\r\nContent-Length: 3\r\n\r\nabc\r\n--b1--\r\n";
  EXPECT_EQ(multipart_parts(body, "Multipart/Related; boundary=\"b1\"; type=\"application/dicom\""),
            std::vector<std::string>{"abc"});
  EXPECT_THROW(multipart_parts(body.substr(0, 60), "multipart/related; boundary=b1"), Error);
  EXPECT_THROW(multipart_parts(body, "application/dicom"), Error);
}

}  // namespace
}  // namespace tessera::io
