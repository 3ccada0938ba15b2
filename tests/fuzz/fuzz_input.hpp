#pragma once
// Shared by the fuzz targets: the readers open paths, not memory, so each input is written
// to a file of a chosen name inside a private temporary folder (on /dev/shm when there is
// one: a RAM disk keeps tens of thousands of executions per minute cheap). The folder is made
// inside $TESSERA_FUZZ_SCRATCH when that is set: the replays (run_target.sh, replay_main.cpp)
// give each input's process a folder of theirs, which they remove even after a crash.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace tessera::fuzz {

/// A private folder, made once per process and removed at a normal exit (libFuzzer ends with
/// _Exit, which skips that: the replays pass TESSERA_FUZZ_SCRATCH and remove it themselves).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    namespace fs = std::filesystem;
    const char* chosen = std::getenv("TESSERA_FUZZ_SCRATCH");
    const fs::path base = chosen != nullptr && *chosen != '\0' ? fs::path(chosen)
                          : fs::is_directory("/dev/shm")      ? fs::path("/dev/shm")
                                                              : fs::temp_directory_path();
    std::string tmpl = (base / "tessera-fuzz-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("tessera fuzz: mkdtemp");
      std::abort();
    }
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(scratch_dir(), ignored);
    });
    return fs::path(tmpl);
  }();
  return dir;
}

/// Writes `size` bytes to scratch_dir()/name and returns the path. Whatever a reader left
/// beside it (side files) is removed first, so one input never sees another's leftovers.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(scratch_dir(), ignored)) fs::remove_all(entry.path(), ignored);
  const fs::path path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) {
    std::perror("tessera fuzz: cannot write the input file");
    std::abort();
  }
  return path.string();
}

/// An invariant of the reader's contract does not hold: a finding, reported like a crash.
#define TESSERA_FUZZ_EXPECT(cond)                                                      \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

}  // namespace tessera::fuzz
