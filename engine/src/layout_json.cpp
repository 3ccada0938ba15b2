#include "tessera/engine/layout_json.hpp"

#include <stdexcept>

#include "tessera/core/error.hpp"

namespace tessera::engine {

Index parse_image(const std::string& text) {
  std::string s = text;
  for (size_t p; (p = s.find("×")) != std::string::npos;) s.replace(p, std::string("×").size(), "x");
  Index wh;
  size_t start = 0;
  while (true) {
    const size_t x = s.find('x', start);
    const std::string part = s.substr(start, x == std::string::npos ? std::string::npos : x - start);
    try {
      size_t used = 0;
      const long long v = std::stoll(part, &used);
      if (used != part.size() || v < 1) throw std::invalid_argument(part);
      wh.push_back(v);
    } catch (const std::exception&) {
      throw Error("--image: '" + text + "' is not W×H or W×H×D with positive integers");
    }
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (wh.size() != 2 && wh.size() != 3) throw Error("--image: '" + text + "' must have 2 or 3 extents");
  return Index(wh.rbegin(), wh.rend());
}

nlohmann::json simulation_json(const parallel::SimulationResult& r, const parallel::SimulationOptions& o) {
  const auto& b = r.breakdown;
  return {{"pass_seconds", r.pass_seconds},
          {"step_seconds", r.step_seconds},
          {"steps", r.steps},
          {"tiles", o.tiles},
          {"tile_seconds", r.tile_seconds},
          {"tile_flops", r.tile_flops},
          {"balance", r.balance},
          {"breakdown",
           {{"compute", b.compute},
            {"bubble", b.bubble},
            {"halo", b.halo},
            {"allreduce", b.allreduce},
            {"io", b.io},
            {"optimizer", b.optimizer}}},
          {"device_peak_bytes", r.device_peak_bytes},
          {"fits_memory", r.fits_memory},
          {"activation_checkpoint", to_string(o.checkpoint)}};
}

}  // namespace tessera::engine
