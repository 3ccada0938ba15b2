#include "child_process.hpp"

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "tessera/core/error.hpp"

extern char** environ;

namespace tessera::cli {

std::string self_executable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

ChildResult run_child(const std::vector<std::string>& argv, bool capture_stdout) {
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
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
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
