// tessera — segment images too large for one device. See `tessera --help`.
#include <cstdio>

#include <torch/torch.h>

#include "commands.hpp"
#include "tessera/core/error.hpp"

namespace tessera::cli {

std::string build_summary() {
  std::string s = "tessera " TESSERA_VERSION " | backends: cpu";
#if TESSERA_HAVE_CUDA
  s += " cuda";
#endif
#if TESSERA_HAVE_NCCL
  s += " nccl";
#endif
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return 1;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
