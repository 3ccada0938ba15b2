#include "dicomweb_multipart.hpp"

#include <algorithm>
#include <cctype>
#include <random>

#include "tessera/core/error.hpp"

namespace tessera::io {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// The boundary parameter of a multipart Content-Type, unquoted.
std::string boundary_of(const std::string& content_type) {
  if (lower(content_type).rfind("multipart/", 0) != 0)
    throw Error("expected a multipart answer, got Content-Type '" + content_type + "'");
  const size_t at = lower(content_type).find("boundary=");
  if (at == std::string::npos) throw Error("multipart Content-Type without a boundary: '" + content_type + "'");
  std::string b = content_type.substr(at + 9);
  if (!b.empty() && b.front() == '"') {
    b = b.substr(1, b.find('"', 1) - 1);
  } else {
    b = b.substr(0, b.find(';'));
    while (!b.empty() && std::isspace(static_cast<unsigned char>(b.back()))) b.pop_back();
  }
  if (b.empty()) throw Error("multipart Content-Type with an empty boundary: '" + content_type + "'");
  return b;
}

}  // namespace

std::vector<std::string> multipart_parts(const std::string& body, const std::string& content_type) {
  const std::string delimiter = "--" + boundary_of(content_type);
  std::vector<std::string> parts;
  size_t at = body.find(delimiter);
  if (at == std::string::npos) throw Error("multipart answer without its boundary");
  for (;;) {
    at += delimiter.size();
    if (body.compare(at, 2, "--") == 0) return parts;  // the close delimiter
    const size_t headers_end = body.find("\r\n\r\n", at);
    if (headers_end == std::string::npos) throw Error("multipart part without the blank line after its headers");
    const size_t data = headers_end + 4;
    const size_t next = body.find("\r\n" + delimiter, data);
    if (next == std::string::npos) throw Error("multipart answer cut short (no closing boundary)");
    parts.push_back(body.substr(data, next - data));
    at = next + 2;
  }
}

MultipartBody multipart_related(const std::vector<std::string>& payloads, const std::string& part_type) {
  std::mt19937_64 random(std::random_device{}());
  std::string boundary;
  const auto clashes = [&] {
    return std::any_of(payloads.begin(), payloads.end(), [&](const std::string& p) { return p.find(boundary) != std::string::npos; });
  };
  do boundary = "tessera-" + std::to_string(random()) + "-" + std::to_string(random());
  while (clashes());
  MultipartBody m;
  m.content_type = "multipart/related; type=\"" + part_type + "\"; boundary=" + boundary;
  for (const auto& p : payloads) m.body += "--" + boundary + "\r\nContent-Type: " + part_type + "\r\n\r\n" + p + "\r\n";
  m.body += "--" + boundary + "--\r\n";
  return m;
}

}  // namespace tessera::io
