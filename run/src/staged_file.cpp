#include "tessera/run/staged_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "tessera/core/error.hpp"

namespace tessera {
namespace fs = std::filesystem;

std::string staged_path(const std::string& final_path, std::string_view extension) {
  return final_path + ".partial-" + std::to_string(::getpid()) + std::string(extension);
}

StagedFile::StagedFile(std::string final_path, std::string_view extension)
    : final_(std::move(final_path)), temp_(staged_path(final_, extension)) {
  const fs::path parent = fs::path(final_).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) throw Error(final_ + ": cannot create the folder " + parent.string() + ": " + ec.message());
}

StagedFile::StagedFile(StagedFile&& other) noexcept
    : final_(std::move(other.final_)), temp_(std::move(other.temp_)), done_(other.done_) {
  other.done_ = true;
}

StagedFile::~StagedFile() {
  if (!done_) discard();
}

void StagedFile::commit() {
  std::error_code ec;
  fs::rename(temp_, final_, ec);
  if (ec) throw Error(final_ + ": cannot move the finished file into place: " + ec.message());
  done_ = true;
}

void StagedFile::discard() noexcept {
  std::error_code ignored;
  fs::remove(temp_, ignored);
  done_ = true;
}

void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts) {
  StagedFile staged(path);
  const int fd = ::open(staged.path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path + ": cannot write: " + std::strerror(errno));
  auto fail = [&](int err) {
    ::close(fd);
    throw Error(path + ": cannot write: " + std::strerror(err));
  };
  for (std::string_view part : parts)
    for (size_t done = 0; done < part.size();) {
      const ssize_t n = ::write(fd, part.data() + done, part.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(n < 0 ? errno : ENOSPC);
      done += static_cast<size_t>(n);
    }
  if (::fsync(fd) != 0) fail(errno);
  if (::close(fd) != 0) throw Error(path + ": cannot write: " + std::strerror(errno));
  staged.commit();
}

}  // namespace tessera
