// main() for fuzz targets built without libFuzzer (g++, or any build without TESSERA_FUZZ):
// runs LLVMFuzzerTestOneInput once on every file given, or in the folders given, so the
// seed corpus and kept crash inputs are a regression test under ctest label `fuzz`.
//
// Each input runs alone: in a process of its own, forked before any input ran, with a fresh
// scratch folder (TESSERA_FUZZ_SCRATCH, see fuzz_input.hpp) removed after it even when the
// process crashed. Nothing an earlier input left in ITK's, GDCM's, DCMTK's or GDAL's
// process-wide state can change an input's outcome, so what fails here fails again as
// `fuzz_NAME FILE` (a single input runs in this process, handy under a debugger).
//
// Exit 0 when every input ran cleanly. 1 when any input failed (a crash, an abort on a broken
// invariant, a sanitizer report, more than kSecondsPerInput), after running the rest and
// listing each failure; 1 too when a path given does not exist or a folder given holds no
// input (a corpus that was not generated must not pass silently), or when
// TESSERA_FUZZ_SKIP_DICOM, meant for the exploration only, would leave inputs out.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {
namespace fs = std::filesystem;

// As run_target.sh's -timeout for the libFuzzer build's replay.
constexpr unsigned kSecondsPerInput = 60;

// The inputs named by the arguments (files, or every file below a folder), sorted; fails
// with a message when an argument names nothing or a folder holds no file.
bool collect_inputs(int argc, char** argv, std::vector<fs::path>& inputs) {
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    if (arg.string().rfind("-", 0) == 0) continue;  // libFuzzer flags: ignored here
    if (fs::is_directory(arg)) {
      const size_t before = inputs.size();
      for (const auto& entry : fs::recursive_directory_iterator(arg))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      if (inputs.size() == before) {
        std::fprintf(stderr, "%s: folder holds no inputs to replay\n", arg.c_str());
        return false;
      }
    } else if (fs::is_regular_file(arg)) {
      inputs.push_back(arg);
    } else {
      std::fprintf(stderr, "%s: no such file or folder\n", arg.c_str());
      return false;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  return true;
}

void run_input(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::fprintf(stderr, "replay %s (%zu bytes)\n", path.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// A folder of its own for one input's process, on the RAM disk when there is one.
fs::path fresh_scratch_base() {
  const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  std::string tmpl = (base / "tessera-replay-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("replay: mkdtemp");
    std::exit(1);
  }
  return tmpl;
}

// Runs one input in a child process; empty when it ran cleanly, else how it failed.
std::string run_alone(const fs::path& path) {
  const fs::path scratch = fresh_scratch_base();
  ::setenv("TESSERA_FUZZ_SCRATCH", scratch.c_str(), 1);
  std::fflush(nullptr);  // nothing buffered twice
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("replay: fork");
    std::exit(1);
  }
  if (child == 0) {
    ::alarm(kSecondsPerInput);
    run_input(path);
    std::exit(0);  // atexit handlers run: the scratch folder's removal, LeakSanitizer's check
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  if (WIFSIGNALED(status))
    return WTERMSIG(status) == SIGALRM ? "ran longer than " + std::to_string(kSecondsPerInput) + " s"
                                       : std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "exit status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* skip = std::getenv("TESSERA_FUZZ_SKIP_DICOM"); skip != nullptr && *skip != '\0') {
    std::fprintf(stderr, "TESSERA_FUZZ_SKIP_DICOM is set; a replay runs every input (unset it)\n");
    return 1;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> inputs;
  if (!collect_inputs(argc, argv, inputs)) return 1;
  if (inputs.empty()) {
    std::fprintf(stderr, "%s: no inputs to replay\n", argc > 0 ? argv[0] : "fuzz target");
    return 1;
  }
  if (inputs.size() == 1) {
    run_input(inputs.front());
    std::printf("replayed 1 input\n");
    return 0;
  }
  std::vector<std::string> failures;
  for (const auto& path : inputs)
    if (const std::string failure = run_alone(path); !failure.empty()) {
      std::fprintf(stderr, "FAILED %s: %s\n", path.c_str(), failure.c_str());
      failures.push_back(path.string() + ": " + failure);
    }
  std::printf("replayed %zu inputs, each in its own process: %zu failed\n", inputs.size(), failures.size());
  for (const auto& failure : failures) std::printf("  %s\n", failure.c_str());
  return failures.empty() ? 0 : 1;
}
