#pragma once
// The HTTP side of DicomWebClient (tessera/io/dicomweb.hpp): libcurl with the environment's
// credentials, TLS verification, timeouts and bounded retries; every failure one line.
// Internal to io/.
#include <string>

namespace tessera::io {

struct HttpAnswer {
  long status = 0;
  std::string content_type;
  std::string body;
};

class DicomWebHttp {
 public:
  /// `what` prefixes every error (e.g. "--input dicomweb://host/dicom-web/studies/1.2").
  /// Reads TESSERA_DICOMWEB_* (see dicomweb.hpp); throws naming a malformed one.
  explicit DicomWebHttp(std::string what);
  ~DicomWebHttp();
  DicomWebHttp(const DicomWebHttp&) = delete;
  DicomWebHttp& operator=(const DicomWebHttp&) = delete;

  /// GET `url` with `accept`; 2xx answers are returned, 404 too when `missing_ok` (QIDO of
  /// something absent); anything else throws "<what>: HTTP <status> <reason> from <url>".
  HttpAnswer get(const std::string& url, const std::string& accept, bool missing_ok = false);
  /// POST `body` as `content_type` to `url`, accepting `accept`; as get().
  HttpAnswer post(const std::string& url, const std::string& content_type, const std::string& body,
                  const std::string& accept);

 private:
  HttpAnswer request(const std::string& url, const std::string& accept, const std::string* content_type,
                     const std::string* body, bool missing_ok);

  std::string what_;
  void* curl_ = nullptr;  ///< CURL*, kept for connection reuse
  std::string token_, user_, password_, ca_bundle_;
  long timeout_s_ = 120;
  int retries_ = 3;
};

}  // namespace tessera::io
