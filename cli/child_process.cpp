#include "child_process.hpp"

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tessera/core/error.hpp"
#include "tessera/run/process_memory.hpp"

extern char** environ;

namespace tessera::cli {

void report_peak_rss_at_exit() {
  static std::string path;
  if (const char* p = std::getenv("TESSERA_PEAK_RSS_FILE"); p && *p) path = p;
  if (path.empty()) return;
  std::atexit([] {
    if (std::FILE* f = std::fopen(path.c_str(), "w")) {
      std::fprintf(f, "%lld\n", static_cast<long long>(peak_resident_bytes() / 1024));
      std::fclose(f);
    }
  });
}

std::string self_executable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

namespace {

// Where a Tessera child writes its own peak resident memory at exit (report_peak_rss_at_exit,
// which its main calls first).
std::string peak_rss_file() {
  static std::atomic<int> n{0};
  return (std::filesystem::temp_directory_path() /
          ("tessera-peak-rss-" + std::to_string(getpid()) + "-" + std::to_string(n++)))
      .string();
}

}  // namespace

ChildResult run_child(const std::vector<std::string>& argv, bool capture_stdout) {
  // wait4's ru_maxrss starts from this process's own high-water mark (posix_spawn runs the
  // child on this memory until exec), so a child smaller than this bench reads as large as it.
  // This executable as a child reports its own VmHWM instead (TESSERA_PEAK_RSS_FILE).
  const bool tessera = argv[0] == self_executable();
  const std::string peak_file = tessera ? peak_rss_file() : "";
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "TESSERA_PEAK_RSS_FILE=", 22) != 0) env_strings.emplace_back(*e);
  if (tessera) env_strings.push_back("TESSERA_PEAK_RSS_FILE=" + peak_file);
  std::vector<char*> env;
  for (auto& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int pipefd[2] = {-1, -1};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (capture_stdout) {
    if (pipe(pipefd) != 0) throw Error("cannot create a pipe for " + argv[0]);
    posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipefd[0]);
  }
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error(argv[0] + ": cannot start (" + std::string(strerror(rc)) + ")");
  ChildResult r;
  if (capture_stdout) {
    close(pipefd[1]);
    char buf[4096];
    ssize_t n;
    while ((n = read(pipefd[0], buf, sizeof buf)) > 0) r.out.append(buf, static_cast<size_t>(n));
    close(pipefd[0]);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_rss_mib = usage.ru_maxrss / 1024.0;  // Linux reports KiB
  if (tessera) {
    std::ifstream in(peak_file);
    if (double kib = 0; in >> kib && kib > 0) r.peak_rss_mib = kib / 1024.0;
    std::error_code ignored;
    std::filesystem::remove(peak_file, ignored);
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

ChildResult run_ranks(const std::string& mpirun, int ranks, const std::vector<std::string>& args, const std::string& what) {
  std::vector<std::string> cmd;
  if (ranks > 1) cmd = {mpirun, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks)};
  cmd.push_back(self_executable());
  cmd.insert(cmd.end(), args.begin(), args.end());
  ChildResult r = run_child(cmd, true);
  if (r.exit_code != 0) throw Error(what + " failed (exit " + std::to_string(r.exit_code) + "; its error is above)");
  return r;
}

nlohmann::json last_json(const std::string& out, const std::string& what) {
  const size_t at = out.rfind("\n{");
  const size_t from = at == std::string::npos ? (out.rfind('{', 0) == 0 ? 0 : std::string::npos) : at + 1;
  if (from == std::string::npos) throw Error(what + " printed no JSON report");
  return nlohmann::json::parse(out.substr(from));
}

}  // namespace tessera::cli
