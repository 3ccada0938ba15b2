#include "tessera/core/sliding_window.hpp"

#include <cmath>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

std::string sides(const Index& v) {
  std::string s;
  for (size_t a = 0; a < v.size(); ++a) s += (a ? "×" : "") + std::to_string(v[a]);
  return s;
}

}  // namespace

void SlidingWindowOptions::validate(const UNetOptions& model) const {
  if (static_cast<int>(window.size()) != model.dims)
    throw Error("window " + sides(window) + ": needs " + std::to_string(model.dims) + " sides for a " +
                std::to_string(model.dims) + "-D model");
  if (!(overlap >= 0 && overlap < 1)) throw Error("overlap " + std::to_string(overlap) + ": must be in [0, 1)");
  if (!(sigma_scale > 0)) throw Error("sigma_scale " + std::to_string(sigma_scale) + ": must be > 0");
  window_output_sides(model, window);
}

std::vector<int64_t> window_starts(int64_t extent, int64_t side, double overlap, int64_t alignment) {
  if (extent <= side) return {0};
  const int64_t last = (extent - side + alignment - 1) / alignment * alignment;
  const double most = std::max(1.0, double(side) * (1 - overlap));
  const int64_t n = static_cast<int64_t>(std::ceil(double(last) / most)) + 1;
  std::vector<int64_t> starts;
  const double step = double(last) / double(n - 1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = std::llround(step * double(i) / double(alignment)) * alignment;
    if (starts.empty() || s > starts.back()) starts.push_back(s);
  }
  return starts;
}

std::vector<double> gaussian_profile(int64_t side, double sigma_scale) {
  const double c = double(side - 1) / 2, sigma = sigma_scale * double(side);
  std::vector<double> w;
  for (int64_t i = 0; i < side; ++i) w.push_back(std::exp(-(double(i) - c) * (double(i) - c) / (2 * sigma * sigma)));
  return w;
}

Index window_output_sides(const UNetOptions& model, const Index& window) {
  Index out;
  const int64_t a = unet_alignment(model);
  for (int64_t w : window) {
    const std::optional<int64_t> o = unet_output_size(model, w);
    if (!o || *o <= 0 || (model.padding == Padding::kSame && w % a != 0))
      throw Error("window " + sides(window) + ": side " + std::to_string(w) + " is not an input size this network takes" +
                  (model.padding == Padding::kSame ? " (a multiple of " + std::to_string(a) + ")" : ""));
    out.push_back(*o);
  }
  return out;
}

Index training_window(const UNetOptions& model, int64_t tile) {
  const int64_t halo = model.padding == Padding::kValid ? unet_halo(model) : 0;
  return Index(static_cast<size_t>(model.dims), tile + unet_remainder(model) + 2 * halo);
}

std::optional<std::string> window_dependence(const UNetOptions& model) {
  if (!model.is_builtin())
    return "model " + model.name + " is a registry model (its layers may pool over the window, as SE blocks do)";
  if (model.norm == Norm::kInstance || model.norm == Norm::kGroup)
    return "norm is " + to_string(model.norm) + " (statistics over the window)";
  return std::nullopt;
}

void check_window_option(const std::string& asked) {
  if (asked != "auto" && asked != "gaussian" && asked != "exact")
    throw Error("--window " + asked + ": must be auto, gaussian or exact");
}

WindowChoice choose_window(const std::string& asked, const UNetOptions& model, const Index& training_window,
                           const std::string& exact_only) {
  check_window_option(asked);
  WindowChoice c;
  if (asked == "exact") return c;
  const std::optional<std::string> depends = window_dependence(model);
  if (asked == "gaussian") {
    if (training_window.empty())
      throw Error("--window gaussian: the checkpoint does not record the window it was trained on (trained before "
                  "Tessera kept it); train again or use --window exact");
    if (!exact_only.empty()) throw Error("--window gaussian: not with " + exact_only + "; use --window exact");
  } else if (!depends) {
    c.why = "exact (auto: the output does not depend on the window)";
    return c;
  } else if (training_window.empty()) {
    c.why = "exact (auto: " + *depends + ", but the checkpoint records no training window)";
    return c;
  } else if (!exact_only.empty()) {
    c.why = "exact (auto: " + exact_only + " given)";
    return c;
  }
  c.gaussian = true;
  c.window = training_window;
  c.why = "gaussian windows " + sides(training_window) + " (" + (asked == "auto" ? "auto: " + *depends + "; " : "") +
          "the training window, overlap 1/2, σ = side/8)";
  return c;
}

}  // namespace tessera
