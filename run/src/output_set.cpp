#include "tessera/run/output_set.hpp"

#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera {
namespace fs = std::filesystem;

namespace {

fs::path staging_folder(const fs::path& final_folder) {
  return final_folder / (".tessera.partial-" + std::to_string(::getpid()));
}

}  // namespace

OutputSet::~OutputSet() {
  if (!committed_) discard();
}

std::string OutputSet::stage(const std::string& final_path) {
  if (const auto it = staged_.find(final_path); it != staged_.end()) return it->second;
  const fs::path target(final_path);
  if (target.filename().empty()) throw Error(final_path + ": an output needs a file name");
  const fs::path folder = target.parent_path();
  const fs::path staging = staging_folder(folder.empty() ? fs::path(".") : folder);
  std::error_code ec;
  fs::create_directories(staging, ec);
  if (ec) throw Error(final_path + ": cannot create the folder " + staging.string() + ": " + ec.message());
  folders_.emplace(staging.string(), folder.empty() ? std::string(".") : folder.string());
  const std::string staged = (staging / target.filename()).string();
  staged_.emplace(final_path, staged);
  return staged;
}

std::string OutputSet::locate(const std::string& final_path) const {
  const auto it = staged_.find(final_path);
  return it == staged_.end() ? final_path : it->second;
}

std::string OutputSet::final_of(const std::string& path) const {
  const fs::path p(path);
  const auto it = folders_.find(p.parent_path().string());
  return it == folders_.end() ? path : (fs::path(it->second) / p.filename()).string();
}

void OutputSet::commit() {
  for (const auto& [staging, folder] : folders_) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(staging, ec)) files.push_back(entry.path());
    if (ec) throw Error(staging + ": cannot list the staged outputs: " + ec.message());
    for (const fs::path& file : files) {
      const fs::path target = fs::path(folder) / file.filename();
      fs::rename(file, target, ec);
      if (ec) throw Error(target.string() + ": cannot move the finished file into place: " + ec.message());
    }
    fs::remove(staging, ec);
  }
  committed_ = true;
}

void OutputSet::discard() noexcept {
  for (const auto& [staging, folder] : folders_) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
  }
  committed_ = true;
}

}  // namespace tessera
