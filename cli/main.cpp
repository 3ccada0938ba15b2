// tessera — segment images too large for one device. See `tessera --help`.
#include <cstdio>

#include <torch/torch.h>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/communicator.hpp"
#include "tessera/parallel/comm/runtime.hpp"

namespace tessera::cli {

std::string build_summary() {
  std::string s = "tessera " TESSERA_VERSION " | backends: cpu " + parallel::compiled_backends();
  s += " | libtorch " TORCH_VERSION;
  return s;
}

}  // namespace tessera::cli

int main(int argc, char** argv) {
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
  tessera::cli::register_bench(app);
  tessera::cli::register_export(app);
  tessera::cli::register_plan(app);
  tessera::cli::register_simulate(app);
  try {
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
