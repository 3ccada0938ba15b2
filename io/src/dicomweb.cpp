#include "tessera/io/dicomweb.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "dicomweb_http.hpp"
#include "dicomweb_multipart.hpp"
#include "tessera/core/error.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kDicomJson = "application/dicom+json";
const char* const kDicomParts = "multipart/related; type=\"application/dicom\"";

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t slash = std::min(path.find('/', at), path.size());
    if (slash > at) parts.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  return parts;
}

// A QIDO-RS attribute's first value as text ("" when absent): strings, and IS / US numbers.
std::string first_value(const json& item, const char* tag) {
  const auto a = item.find(tag);
  if (a == item.end() || !a->contains("Value") || (*a)["Value"].empty()) return "";
  const json& v = (*a)["Value"][0];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return "";
}

json parse_json(const HttpAnswer& answer, const std::string& what, const std::string& url) {
  if (answer.status == 204 || answer.body.empty()) return json::array();  // QIDO: no match
  try {
    return json::parse(answer.body);
  } catch (const json::exception&) {
    throw Error(what + ": " + url + " answered with what is not DICOM JSON (" + answer.content_type + ")");
  }
}

}  // namespace

bool is_dicomweb(const std::string& text) { return text.rfind("dicomweb://", 0) == 0 || text.rfind("dicomwebs://", 0) == 0; }

DicomWebAddress parse_dicomweb(const std::string& text, const std::string& flag) {
  const std::string what = flag + " " + text;
  if (!is_dicomweb(text)) throw Error(what + ": not a dicomweb:// or dicomwebs:// address");
  const bool tls = text.rfind("dicomwebs://", 0) == 0;
  const std::string rest = text.substr(tls ? 12 : 11);
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  const std::string host = authority.substr(0, authority.rfind(':'));
  if (host.empty() || authority.find_first_of("@?#") != std::string::npos)
    throw Error(what + ": expected dicomweb://HOST[:PORT]/PATH (credentials go in TESSERA_DICOMWEB_*, not the address)");
  if (host.size() != authority.size()) {
    const std::string port = authority.substr(host.size() + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      throw Error(what + ": port '" + port + "' is not a number from 1 to 65535");
  }
  const std::vector<std::string> parts = split_path(slash == std::string::npos ? "" : rest.substr(slash));
  size_t k = 0;
  while (k < parts.size() && parts[k] != "studies") ++k;
  DicomWebAddress a;
  a.given = text;
  a.base = std::string(tls ? "https://" : "http://") + authority;
  for (size_t i = 0; i < k; ++i) a.base += "/" + parts[i];
  const std::vector<std::string> tail(parts.begin() + std::ptrdiff_t(k), parts.end());
  const bool shaped = tail.empty() || (tail.size() == 2) || (tail.size() == 4 && tail[2] == "series");
  if (!shaped) throw Error(what + ": expected .../studies/STUDY_UID or .../studies/STUDY_UID/series/SERIES_UID");
  if (tail.size() >= 2) a.study = tail[1];
  if (tail.size() == 4) a.series = tail[3];
  for (const std::string* uid : {&a.study, &a.series})
    if (!uid->empty() && !is_dicom_uid(*uid))
      throw Error(what + ": '" + *uid + "' is not a DICOM UID (digits and dots, at most 64 characters)");
  return a;
}

DicomWebClient::DicomWebClient(DicomWebAddress address, std::string flag)
    : address_(std::move(address)), flag_(std::move(flag)),
      http_(std::make_unique<DicomWebHttp>(flag_ + " " + address_.given)) {}

DicomWebClient::~DicomWebClient() = default;

void DicomWebClient::probe() {
  const std::string url = address_.base + "/studies" + (address_.study.empty() ? "?limit=1" : "?StudyInstanceUID=" + address_.study);
  http_->get(url, kDicomJson, true);
}

std::vector<DicomSeriesSummary> DicomWebClient::series() {
  const std::string what = flag_ + " " + address_.given;
  if (address_.study.empty()) throw Error(what + ": name a study (.../studies/STUDY_UID) to list its series");
  const std::string url = address_.base + "/studies/" + address_.study + "/series";
  const json list = parse_json(http_->get(url, kDicomJson, true), what, url);
  std::vector<DicomSeriesSummary> out;
  for (const json& item : list) {
    DicomSeriesSummary s;
    s.uid = first_value(item, "0020000E");
    s.modality = first_value(item, "00080060");
    s.description = first_value(item, "0008103E");
    const std::string n = first_value(item, "00201209");
    s.slices = n.empty() ? 0 : std::stoll(n);
    if (!s.uid.empty()) out.push_back(std::move(s));
  }
  if (out.empty()) throw Error(what + ": the server holds no series of study " + address_.study);
  return out;
}

int64_t DicomWebClient::retrieve_series(const std::string& folder) {
  const std::string what = flag_ + " " + address_.given;
  if (address_.series.empty()) throw Error(what + ": name a series (.../studies/STUDY_UID/series/SERIES_UID)");
  const std::string series_url = address_.base + "/studies/" + address_.study + "/series/" + address_.series;
  const std::string url = series_url + "/instances";
  const json list = parse_json(http_->get(url, kDicomJson, true), what, url);
  int64_t written = 0;
  for (const json& item : list) {
    const std::string sop = first_value(item, "00080018");
    if (!is_dicom_uid(sop)) throw Error(what + ": QIDO-RS listed an instance without a valid SOPInstanceUID");
    const std::string instance_url = series_url + "/instances/" + sop;
    const HttpAnswer answer = http_->get(instance_url, kDicomParts);
    std::vector<std::string> parts;
    try {
      parts = multipart_parts(answer.body, answer.content_type);
    } catch (const Error& e) {
      throw Error(what + ": WADO-RS " + instance_url + ": " + e.what());
    }
    if (parts.size() != 1) throw Error(what + ": WADO-RS answered " + std::to_string(parts.size()) +
                                       " parts for the instance " + sop + " (expected one DICOM file)");
    const fs::path file = fs::path(folder) / (sop + ".dcm");
    std::ofstream out(file, std::ios::binary);
    out.write(parts.front().data(), std::streamsize(parts.front().size()));
    if (!out.flush()) throw Error(file.string() + ": cannot write the retrieved instance");
    ++written;
  }
  if (written == 0)
    throw Error(what + ": no such series on the server (QIDO-RS found no instance of series " + address_.series + ")");
  return written;
}

void DicomWebClient::store(const std::vector<std::string>& files) {
  const std::string what = flag_ + " " + address_.given;
  std::vector<std::string> bodies;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw Error(what + ": cannot read " + f);
    bodies.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const MultipartBody body = multipart_related(bodies, "application/dicom");
  const std::string url = address_.base + "/studies" + (address_.study.empty() ? "" : "/" + address_.study);
  const json answer = parse_json(http_->post(url, body.content_type, body.body, kDicomJson), what, url);
  const auto failed = answer.find("00081198");  // FailedSOPSequence
  const auto stored = answer.find("00081199");  // ReferencedSOPSequence
  const size_t n_failed = failed != answer.end() && failed->contains("Value") ? (*failed)["Value"].size() : 0;
  const size_t n_stored = stored != answer.end() && stored->contains("Value") ? (*stored)["Value"].size() : 0;
  if (n_failed > 0 || n_stored != files.size())
    throw Error(what + ": STOW-RS stored " + std::to_string(n_stored) + " of " + std::to_string(files.size()) +
                " instances (" + std::to_string(n_failed) + " refused by the server)");
}

}  // namespace tessera::io
