#pragma once
// Staged output: every file Tessera writes appears under its final name complete or not at
// all. The writer fills a temporary next to the target, then commits (rename, atomic on one
// file system); a writer that fails or is killed leaves at most a temporary, which
// RunLayout::is_temporary names and readers skip. One spelling of the temporary name:
//
//   <folder>/<file name>.partial-<pid><extension>     e.g. labels.tif.partial-4711.tif
//
// `extension` is for libraries that choose a format by the name (GDAL, ITK): give the final
// extension again so the temporary is written in the same format. Torch-free, MPI-free.
#include <initializer_list>
#include <string>
#include <string_view>

namespace tessera {

/// The temporary name for `final_path` (no I/O).
std::string staged_path(const std::string& final_path, std::string_view extension = {});

/// One output file in the making. Creates the target's folder; the destructor removes the
/// temporary unless commit() succeeded. Not copyable; movable.
class StagedFile {
 public:
  explicit StagedFile(std::string final_path, std::string_view extension = {});
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  StagedFile(StagedFile&& other) noexcept;
  StagedFile& operator=(StagedFile&&) = delete;

  /// Where to write now.
  const std::string& path() const { return temp_; }
  /// Where the file appears on commit().
  const std::string& final_path() const { return final_; }
  /// Moves the temporary into place. Throws tessera::Error naming the final path.
  void commit();
  /// Removes the temporary now (also done by the destructor when not committed).
  void discard() noexcept;

 private:
  std::string final_;
  std::string temp_;
  bool done_ = false;
};

/// Writes the concatenation of `parts` to `path` staged and durably (temporary, fsync,
/// rename). Throws tessera::Error "<path>: cannot write: <reason>".
void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts);

}  // namespace tessera
