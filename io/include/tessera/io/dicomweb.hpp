#pragma once
// DICOMweb (DICOM PS3.18) as a PACS speaks it to OHIF, MONAI Label or 3D Slicer: QIDO-RS to
// find series and instances, WADO-RS to retrieve instances, STOW-RS to store new ones. A
// server is addressed as
//
//   dicomweb://HOST[:PORT]/PATH[/studies/STUDY_UID[/series/SERIES_UID]]     (HTTP)
//   dicomwebs://HOST[:PORT]/PATH[/studies/...]                             (HTTPS, TLS verified)
//
// where PATH is the service root (Orthanc: /dicom-web, DCM4CHEE: /dcm4chee-arc/aets/DCM4CHEE/rs).
// Credentials come from the environment only, never from a flag (so they stay out of shell
// histories, process lists and the run's config.yaml):
//   TESSERA_DICOMWEB_TOKEN                          an OAuth bearer token, or
//   TESSERA_DICOMWEB_USER, TESSERA_DICOMWEB_PASSWORD  HTTP basic authentication;
//   TESSERA_DICOMWEB_CA_BUNDLE   a PEM file of the CAs to trust (a hospital's own CA)
//   TESSERA_DICOMWEB_TIMEOUT     seconds one request may take (default 120; connect: 10)
//   TESSERA_DICOMWEB_RETRIES     tries for a request that fails to connect, times out or
//                                gets 408/429/5xx (default 3, backing off 0.5 s, 1 s, ...)
// Every failure is a tessera::Error of one line naming the address: an unreachable server,
// an HTTP error with its status, a series the server does not hold. HTTP is libcurl's; its
// types stay in io/src. Torch-free; not thread safe (one client per thread).
#include <memory>
#include <string>
#include <vector>

#include "tessera/io/dicom_series.hpp"

namespace tessera::io {

/// A parsed dicomweb:// or dicomwebs:// address.
struct DicomWebAddress {
  std::string base;    ///< the service root as an http(s) URL, no trailing slash
  std::string study;   ///< StudyInstanceUID, or ""
  std::string series;  ///< SeriesInstanceUID, or "" (needs study)
  std::string given;   ///< the address as the user wrote it (for messages)
};

/// True for a dicomweb:// or dicomwebs:// address.
bool is_dicomweb(const std::string& text);
/// Throws tessera::Error "<flag> <text>: ..." for a malformed address (no host, a bad port,
/// a UID that is not digits and dots, /series without /studies).
DicomWebAddress parse_dicomweb(const std::string& text, const std::string& flag);

class DicomWebHttp;  // libcurl, io/src

/// One DICOMweb service. Each call is one or more HTTP requests, retried as above.
class DicomWebClient {
 public:
  /// `flag` prefixes every error ("--input", "--store", "info").
  DicomWebClient(DicomWebAddress address, std::string flag);
  ~DicomWebClient();
  DicomWebClient(const DicomWebClient&) = delete;
  DicomWebClient& operator=(const DicomWebClient&) = delete;

  /// One QIDO-RS request (a study, or any one study of the service): throws what any other
  /// request would (unreachable, refused credentials), so a run can fail before its work.
  void probe();
  /// QIDO-RS: the series of the address's study (slices: its NumberOfSeriesRelatedInstances).
  /// Throws when the study holds none.
  std::vector<DicomSeriesSummary> series();
  /// QIDO-RS, then WADO-RS per instance: every instance of the address's series written as
  /// `folder`/<SOPInstanceUID>.dcm. Returns how many. Throws when the series has no instance.
  int64_t retrieve_series(const std::string& folder);
  /// STOW-RS: the DICOM files in one multipart/related request to <base>/studies (or the
  /// address's study); throws unless the server lists every one as stored.
  void store(const std::vector<std::string>& files);

 private:
  DicomWebAddress address_;
  std::string flag_;
  std::unique_ptr<DicomWebHttp> http_;
};

}  // namespace tessera::io
