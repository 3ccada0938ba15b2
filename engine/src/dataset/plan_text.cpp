// The fingerprint and the plan as text and JSON (dataset_plan.hpp).
#include <nlohmann/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/core/tile_choice.hpp"
#include "tessera/engine/dataset_plan.hpp"

namespace tessera::engine {

nlohmann::json plan_json(const DatasetFingerprint& f, const TrainingPlan& p) {
  nlohmann::json cases = nlohmann::json::array();
  for (const CaseFingerprint& c : f.cases) cases.push_back({{"id", c.id}, {"extent", c.extent}, {"spacing", c.spacing}});
  nlohmann::json choices = nlohmann::json::array();
  for (const PlanChoice& c : p.choices) choices.push_back({{"key", c.key}, {"value", c.value}, {"why", c.why}});
  return {{"fingerprint",
           {{"folder", f.folder},
            {"name", f.name},
            {"modality", f.modality},
            {"dims", f.dims},
            {"cases", cases},
            {"class_names", f.class_names},
            {"class_fractions", f.class_fractions},
            {"foreground", {{"low", f.fg_low}, {"high", f.fg_high}, {"mean", f.fg_mean}, {"std", f.fg_std},
                            {"voxels", f.fg_voxels}}}}},
          {"plan",
           {{"spacing", p.spacing},
            {"median_shape", p.median_shape},
            {"patch", p.patch},
            {"pooling", p.pooling},
            {"levels", p.levels},
            {"batch", p.batch},
            {"predicted_bytes", p.predicted_bytes},
            {"base_filters", p.base_filters},
            {"max_filters", p.max_filters},
            {"choices", choices}}}};
}

std::string describe_plan(const DatasetFingerprint& f, const TrainingPlan& p) {
  std::string s = fmt::format("dataset {} ({}{}): {} cases, {}-D\n", f.folder, f.name.empty() ? "unnamed" : f.name,
                              f.modality.empty() ? "" : ", " + f.modality, f.cases.size(), f.dims);
  for (const CaseFingerprint& c : f.cases)
    s += fmt::format("  {}: {} voxels, spacing {:.3g}\n", c.id, fmt::join(c.extent, "×"), fmt::join(c.spacing, " × "));
  s += "  classes:";
  for (size_t k = 0; k < f.class_names.size(); ++k)
    s += fmt::format(" {} {:.2f} %{}", f.class_names[k], 100 * f.class_fractions[k], k + 1 < f.class_names.size() ? "," : "\n");
  s += fmt::format("  foreground intensities: 0.5/99.5 % [{:.4g}, {:.4g}], mean {:.4g}, std {:.4g} ({} voxels)\n", f.fg_low,
                   f.fg_high, f.fg_mean, f.fg_std, f.fg_voxels);
  s += "plan:\n";
  for (const PlanChoice& c : p.choices) s += fmt::format("  {}: {}\n      why: {}\n", c.key, c.value, c.why);
  return s;
}

}  // namespace tessera::engine
