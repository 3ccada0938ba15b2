#include "dicomweb_http.hpp"

#include <curl/curl.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "tessera/core/error.hpp"

namespace tessera::io {
namespace {

constexpr long kConnectTimeoutS = 10;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

long env_number(const char* name, long fallback, long min, long max) {
  const std::string v = env(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || n < min || n > max)
    throw Error(std::string(name) + "='" + v + "': must be a whole number from " + std::to_string(min) + " to " +
                std::to_string(max));
  return n;
}

const char* reason(long status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized (set TESSERA_DICOMWEB_USER and TESSERA_DICOMWEB_PASSWORD, or TESSERA_DICOMWEB_TOKEN)";
    case 403: return "Forbidden (the credentials in TESSERA_DICOMWEB_* may not do this)";
    case 404: return "Not Found";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
  }
}

bool retried_status(long s) { return s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504; }

bool retried_transport(CURLcode c) {
  return c == CURLE_COULDNT_CONNECT || c == CURLE_OPERATION_TIMEDOUT || c == CURLE_RECV_ERROR ||
         c == CURLE_SEND_ERROR || c == CURLE_GOT_NOTHING || c == CURLE_PARTIAL_FILE;
}

size_t append_body(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

struct Headers {
  curl_slist* list = nullptr;
  ~Headers() { curl_slist_free_all(list); }
  void add(const std::string& h) { list = curl_slist_append(list, h.c_str()); }
};

}  // namespace

DicomWebHttp::DicomWebHttp(std::string what) : what_(std::move(what)) {
  static const CURLcode global = curl_global_init(CURL_GLOBAL_DEFAULT);  // once, before any handle
  if (global != CURLE_OK) throw Error(what_ + ": libcurl failed to start: " + curl_easy_strerror(global));
  token_ = env("TESSERA_DICOMWEB_TOKEN");
  user_ = env("TESSERA_DICOMWEB_USER");
  password_ = env("TESSERA_DICOMWEB_PASSWORD");
  ca_bundle_ = env("TESSERA_DICOMWEB_CA_BUNDLE");
  if (!token_.empty() && !user_.empty())
    throw Error(what_ + ": set TESSERA_DICOMWEB_TOKEN or TESSERA_DICOMWEB_USER, not both");
  if (user_.empty() != password_.empty())
    throw Error(what_ + ": TESSERA_DICOMWEB_USER and TESSERA_DICOMWEB_PASSWORD go together (one is unset)");
  timeout_s_ = env_number("TESSERA_DICOMWEB_TIMEOUT", 120, 1, 86400);
  retries_ = int(env_number("TESSERA_DICOMWEB_RETRIES", 3, 1, 20));
  curl_ = curl_easy_init();
  if (!curl_) throw Error(what_ + ": libcurl could not make a handle");
}

DicomWebHttp::~DicomWebHttp() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

HttpAnswer DicomWebHttp::get(const std::string& url, const std::string& accept, bool missing_ok) {
  return request(url, accept, nullptr, nullptr, missing_ok);
}

HttpAnswer DicomWebHttp::post(const std::string& url, const std::string& content_type, const std::string& body,
                              const std::string& accept) {
  return request(url, accept, &content_type, &body, false);
}

HttpAnswer DicomWebHttp::request(const std::string& url, const std::string& accept, const std::string* content_type,
                                 const std::string* body, bool missing_ok) {
  CURL* c = static_cast<CURL*>(curl_);
  for (int attempt = 1;; ++attempt) {
    curl_easy_reset(c);
    HttpAnswer answer;
    Headers headers;
    headers.add("Accept: " + accept);
    if (content_type) headers.add("Content-Type: " + *content_type);
    if (!token_.empty()) headers.add("Authorization: Bearer " + token_);
    if (body) headers.add("Expect:");  // no 100-continue round trip
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.list);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer.body);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, kConnectTimeoutS);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s_);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (!ca_bundle_.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, ca_bundle_.c_str());
    if (!user_.empty()) {
      curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
      curl_easy_setopt(c, CURLOPT_USERNAME, user_.c_str());
      curl_easy_setopt(c, CURLOPT_PASSWORD, password_.c_str());
    }
    if (body) {
      curl_easy_setopt(c, CURLOPT_POST, 1L);
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body->size()));
    }
    const CURLcode code = curl_easy_perform(c);
    if (code == CURLE_OK) {
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &answer.status);
      const char* type = nullptr;
      curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type);
      answer.content_type = type ? type : "";
    }
    const bool again = code == CURLE_OK ? retried_status(answer.status) : retried_transport(code);
    if (again && attempt < retries_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500 << (attempt - 1)));
      continue;
    }
    const std::string tries = attempt > 1 ? " (" + std::to_string(attempt) + " tries)" : "";
    if (code != CURLE_OK)
      throw Error(what_ + ": cannot reach " + url + ": " + curl_easy_strerror(code) + tries);
    if ((answer.status >= 200 && answer.status < 300) || (missing_ok && answer.status == 404)) return answer;
    throw Error(what_ + ": HTTP " + std::to_string(answer.status) + " " + reason(answer.status) + " from " + url + tries);
  }
}

}  // namespace tessera::io
