#include "tessera/run/output_set.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera {
namespace fs = std::filesystem;

namespace {

constexpr char kStagingPrefix[] = ".tessera.partial-";

// "<host>-": the staging folders of this host's processes start with it.
std::string host_prefix() {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "host-";
  return std::string(host) + "-";
}

fs::path staging_folder(const fs::path& final_folder) {
  return final_folder / (kStagingPrefix + host_prefix() + std::to_string(::getpid()));
}

// Whether process `pid` of this host is gone: none by that number, or a zombie that only waits
// to be reaped (a killed rank whose parent died first may stay one in a container).
bool process_gone(long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t name_end = line.rfind(')');  // "pid (name) state …"; the name may hold spaces
  return name_end != std::string::npos && name_end + 2 < line.size() &&
         (line[name_end + 2] == 'Z' || line[name_end + 2] == 'X');
}

// Removes the staging folders in `folder` that a killed run of this host left: their process
// is gone. Folders of live processes and of other hosts (whose processes this one cannot
// see) stay.
void remove_abandoned_staging(const fs::path& folder) {
  const std::string mine = kStagingPrefix + host_prefix();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(mine, 0) != 0 || !entry.is_directory(ec)) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + mine.size(), &end, 10);
    if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
    if (process_gone(pid)) fs::remove_all(entry.path(), ec);
  }
}

// One file of a staging folder on its way into place; `previous`: where the file it replaces
// waits until the commit is whole (empty when there was none).
struct Move {
  fs::path staged, target, previous;
};

// Every staged file and its target; a target that is a folder (nothing can replace it) fails
// here, before anything moves.
std::vector<Move> planned_moves(const std::map<std::string, std::string>& folders) {
  std::vector<Move> moves;
  for (const auto& [staging, folder] : folders) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(staging, ec)) {
      Move m{entry.path(), fs::path(folder) / entry.path().filename(), {}};
      std::error_code absent;  // a target that does not exist yet is the usual case
      if (fs::is_directory(m.target, absent))
        throw Error(m.target.string() + ": a folder is in the way of the finished file; nothing was written");
      moves.push_back(std::move(m));
    }
    if (ec) throw Error(staging + ": cannot list the staged outputs: " + ec.message());
  }
  return moves;
}

// Puts back what a failed commit moved: the new files into their staging folder, the files
// they replaced into place.
void undo(std::vector<Move>& moves, size_t moved) noexcept {
  std::error_code ignored;
  for (size_t i = 0; i < moved; ++i) fs::rename(moves[i].target, moves[i].staged, ignored);
  for (const Move& m : moves)
    if (!m.previous.empty()) fs::rename(m.previous, m.target, ignored);
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
  if (!folders_.count(staging.string())) remove_abandoned_staging(folder.empty() ? fs::path(".") : folder);
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
  std::vector<Move> moves = planned_moves(folders_);
  std::error_code ec;
  // The files being replaced step aside first, so a failure can put them back.
  for (Move& m : moves) {
    if (!fs::exists(fs::symlink_status(m.target, ec))) continue;
    const fs::path previous = m.target.string() + ".partial-" + std::to_string(::getpid()) + "-previous";
    fs::rename(m.target, previous, ec);
    if (ec) {
      undo(moves, 0);
      throw Error(m.target.string() + ": cannot replace the existing file: " + ec.message() + "; nothing was written");
    }
    m.previous = previous;
  }
  for (size_t i = 0; i < moves.size(); ++i) {
    fs::rename(moves[i].staged, moves[i].target, ec);
    if (ec) {
      undo(moves, i);
      throw Error(moves[i].target.string() + ": cannot move the finished file into place: " + ec.message() +
                  "; nothing was written");
    }
  }
  for (const Move& m : moves)
    if (!m.previous.empty()) fs::remove(m.previous, ec);
  for (const auto& [staging, folder] : folders_) fs::remove(staging, ec);
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
