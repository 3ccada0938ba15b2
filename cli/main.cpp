// tessera — segment images too large for one device. See `tessera --help`.
#include <cstdio>
#include <set>
#include <string>

#include <torch/torch.h>

#include "child_process.hpp"
#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/parallel/comm/runtime.hpp"

namespace tessera::cli {

std::string build_summary() {
  std::string s = "tessera " TESSERA_VERSION " | backends: cpu " + parallel::compiled_backends();
  s += " | libtorch " TORCH_VERSION;
  return s;
}

// A flag the command does not have fails in one line naming it and the closest flag it has,
// before CLI11 parses (which would first complain of a missing required option, or take the
// flag for a stray value). Flags are looked up on the subcommand named, nested ones included
// (`bench infer`), and on the app (--help, --version); a bare "--" ends the flags.
void refuse_unknown_flags(const CLI::App& app, int argc, char** argv) {
  const CLI::App* cmd = &app;
  std::string path;  // "infer", "bench infer"
  int i = 1;
  for (; i < argc; ++i) {
    const std::string token = argv[i];
    if (token.rfind("-", 0) == 0) break;
    const CLI::App* sub = nullptr;
    for (const CLI::App* s : cmd->get_subcommands({}))
      if (s->check_name(token)) sub = s;
    if (!sub) break;
    cmd = sub;
    path += (path.empty() ? "" : " ") + token;
  }
  std::set<std::string> known;
  for (const CLI::App* a : {cmd, &app})
    for (const CLI::Option* o : a->get_options())
      for (const std::string& name : o->get_lnames()) known.insert(name);
  for (; i < argc; ++i) {
    const std::string token = argv[i];
    if (token == "--") return;
    if (token.rfind("--", 0) != 0) continue;
    const std::string name = token.substr(2, token.find('=') == std::string::npos ? std::string::npos : token.find('=') - 2);
    if (known.count(name)) continue;
    const std::string near = engine::closest_key(name, known);
    const std::string where = path.empty() ? "tessera" : path;
    throw Error(where + ": unknown flag --" + name + (near.empty() ? "" : " (did you mean --" + near + "?)") +
                "; `tessera " + (path.empty() ? "" : path + " ") + "--help` lists them");
  }
}

}  // namespace tessera::cli

int main(int argc, char** argv) {
  tessera::cli::report_peak_rss_at_exit();
  CLI::App app{
      "Tessera segments images too large for one device: satellite GeoTIFF scenes and CT volumes,\n"
      "tiled with halos so that tiling never changes the answer."};
  app.set_version_flag("--version", tessera::cli::build_summary());
  app.require_subcommand(1);
  tessera::cli::register_info(app);
  tessera::cli::register_model_info(app);
  tessera::cli::register_train(app);
  tessera::cli::register_infer(app);
  tessera::cli::register_eval(app);
  tessera::cli::register_postprocess(app);
  tessera::cli::register_bench(app);
  tessera::cli::register_export(app);
  tessera::cli::register_plan(app);
  tessera::cli::register_simulate(app);
  try {
    tessera::cli::refuse_unknown_flags(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tessera::Error& e) {
    // One line naming the rank; under MPI the whole job ends so no rank waits for this one.
    tessera::parallel::abort_job(e.what());
  } catch (const c10::Error& e) {
    tessera::parallel::abort_job(e.what_without_backtrace());
  } catch (const std::exception& e) {
    tessera::parallel::abort_job(e.what());
  }
  return 0;
}
