#include "pacs.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tessera/core/error.hpp"
#include "tessera/io/dicomweb.hpp"

namespace tessera::engine::infer {

namespace fs = std::filesystem;

namespace {

void remove_folder(const std::string& folder) {
  std::error_code ec;
  if (!folder.empty()) fs::remove_all(folder, ec);
}

// The series `input` names, retrieved into a new temporary folder (removed again if that fails).
std::string retrieve(const std::string& input, bool progress) {
  std::string folder = (fs::temp_directory_path() / "tessera-dicomweb-XXXXXX").string();
  if (!::mkdtemp(folder.data()))
    throw Error("--input " + input + ": cannot make a temporary folder in " + fs::temp_directory_path().string());
  try {
    const int64_t n = io::DicomWebClient(io::parse_dicomweb(input, "--input"), "--input").retrieve_series(folder);
    if (progress) std::fprintf(stderr, "%s: %lld instances retrieved\n", input.c_str(), (long long)n);
  } catch (...) {
    remove_folder(folder);
    throw;
  }
  return folder;
}

}  // namespace

PacsExchange::PacsExchange(InferOptions& o) {
  if (io::is_dicomweb(o.input)) {
    address_ = o.input;
    o.input = folder_ = retrieve(o.input, o.progress);
  }
  try {  // refused credentials or an unreachable server fail before the run, not after it
    if (!o.store.empty()) io::DicomWebClient(io::parse_dicomweb(o.store, "--store"), "--store").probe();
  } catch (...) {  // the destructor does not run for a constructor that throws
    remove_folder(folder_);
    throw;
  }
}

PacsExchange::~PacsExchange() { remove_folder(folder_); }

std::string PacsExchange::as_given(std::string message) const {
  for (size_t at; !folder_.empty() && (at = message.find(folder_)) != std::string::npos;)
    message.replace(at, folder_.size(), address_);
  return message;
}

void PacsExchange::store(const InferOptions& o) const {
  if (o.store.empty()) return;
  io::DicomWebClient(io::parse_dicomweb(o.store, "--store"), "--store").store({o.output});
  std::printf("%s: stored to %s\n", o.output.c_str(), o.store.c_str());
}

}  // namespace tessera::engine::infer
