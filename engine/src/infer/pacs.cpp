#include "pacs.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tessera/core/error.hpp"
#include "tessera/io/dicomweb.hpp"

namespace tessera::engine::infer {

namespace fs = std::filesystem;

PacsExchange::PacsExchange(InferOptions& o) {
  if (!o.store.empty())  // refused credentials or an unreachable server fail before the run, not after it
    io::DicomWebClient(io::parse_dicomweb(o.store, "--store"), "--store").probe();
  if (!io::is_dicomweb(o.input)) return;
  std::string pattern = (fs::temp_directory_path() / "tessera-dicomweb-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw Error("--input " + o.input + ": cannot make a temporary folder in " +
                                              fs::temp_directory_path().string());
  folder_ = pattern;
  int64_t n = 0;
  try {
    n = io::DicomWebClient(io::parse_dicomweb(o.input, "--input"), "--input").retrieve_series(folder_);
  } catch (...) {  // the destructor does not run for a constructor that throws
    std::error_code ec;
    fs::remove_all(folder_, ec);
    throw;
  }
  if (o.progress) std::fprintf(stderr, "%s: %lld instances retrieved\n", o.input.c_str(), (long long)n);
  o.input = folder_;
}

PacsExchange::~PacsExchange() {
  std::error_code ec;
  if (!folder_.empty()) fs::remove_all(folder_, ec);
}

void PacsExchange::store(const InferOptions& o) const {
  if (o.store.empty()) return;
  io::DicomWebClient(io::parse_dicomweb(o.store, "--store"), "--store").store({o.output});
  std::printf("%s: stored to %s\n", o.output.c_str(), o.store.c_str());
}

}  // namespace tessera::engine::infer
