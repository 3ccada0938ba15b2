#include <filesystem>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "infer_parts.hpp"
#include "tessera/engine/postprocessing.hpp"
#include "tessera/core/model_json.hpp"
#include "tessera/io/normalization.hpp"
#include "tessera/io/open_image.hpp"

namespace tessera::engine::infer {

int Model::classes() const { return static_cast<int>(loaded.meta.model.classes); }

io::LabelStyle Model::label_style(bool cog) const {
  return io::LabelStyle()
      .with_class_names(loaded.meta.class_names)
      .with_class_colors(loaded.meta.class_colors)
      .with_background(loaded.meta.background)
      .with_classes(classes())
      .with_cog(cog);
}

namespace {

// The checkpoint's run's post-processing (RUN/postprocessing.json), unless --no-postprocessing.
// It is part of what made the labels: a folder's scene labelled without it is not kept.
void use_postprocessing(const InferOptions& o, Model& m) {
  const std::string run = run_of_checkpoint(o.checkpoint);
  const auto decision = read_postprocessing(run);
  if (!decision) return;
  if (!o.postprocessing) {
    m.postprocessing = "post-processing of " + postprocessing_path(run) + " off (--no-postprocessing)";
    return;
  }
  m.keep_largest = decision->keep_largest();
  std::string kept;
  for (int c : m.keep_largest) {
    const auto& names = m.loaded.meta.class_names;
    kept += (kept.empty() ? "" : ", ") + (size_t(c) < names.size() ? names[size_t(c)] : std::to_string(c));
  }
  m.postprocessing = "post-processing (" + postprocessing_path(run) + "): " +
                     (kept.empty() ? "none kept on validation" : "largest component of " + kept);
  if (!kept.empty()) m.maker.model += ", largest component of " + kept;
}

}  // namespace

Model load_model(const InferOptions& o) {
  namespace fs = std::filesystem;
  Model m;
  if (!o.checkpoint.empty()) {
    m.loaded = load_checkpoint(o.checkpoint);
    // What made the labels, as their STAC items record it (a finished scene is kept only
    // when the same maker made it).
    m.maker = {"U-Net from a checkpoint (step " + std::to_string(m.loaded.meta.step) + ")",
               fs::absolute(o.checkpoint).lexically_normal().string()};
    use_postprocessing(o, m);
    return m;
  }
  m.loaded.meta.model = o.model;
  const nlohmann::json options = o.model;  // every override counts: another size is another model
  m.maker = {o.model_preset + " " + options.dump() + " (random init, seed " + std::to_string(o.seed) + ")", ""};
  return m;
}

Network network_for(const InferOptions& o, const Model& model, const ImageSource& image) {
  if (model.loaded.net) return {model.loaded.net, io::resolve_normalization(model.loaded.meta.norm, image)};
  UNetOptions options = o.model;
  options.dims = static_cast<int>(image.info().extent.size());
  options.in_channels = image.info().channels;  // random init follows the input's bands
  torch::manual_seed(o.seed);
  return {UNet(options), io::default_normalization(image)};
}

}  // namespace tessera::engine::infer
