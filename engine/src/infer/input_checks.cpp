// What an input is checked against before any inference: the model's channels (--bands maps
// the input's bands onto them), and what the training images looked like — modality,
// intensity range, pixel size — as the checkpoint stores it (TrainingInputs). A channel count
// that cannot run is an error naming --bands; the others are warnings, since a model may well
// work on a neighbouring kind of image, that name the check and say what to do.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "infer_parts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/hausdorff.hpp"
#include "tessera/io/normalization.hpp"

namespace tessera::engine::infer {
namespace {

// The bands of another ImageSource, chosen and ordered (0-based here).
class BandSelection final : public ImageSource {
 public:
  BandSelection(std::unique_ptr<ImageSource> source, std::vector<int> bands)
      : source_(std::move(source)), bands_(std::move(bands)), info_(source_->info()) {
    info_.channels = static_cast<int>(bands_.size());
    info_.nodata.clear();
    for (int b : bands_)
      info_.nodata.push_back(size_t(b) < source_->info().nodata.size() ? source_->info().nodata[size_t(b)] : std::nullopt);
  }
  const ImageInfo& info() const override { return info_; }
  Block<float> read(const Box& box) const override {
    const Block<float> all = source_->read(box);
    const int64_t n = box.count();
    Index shape{static_cast<int64_t>(bands_.size())};
    shape.insert(shape.end(), box.size.begin(), box.size.end());
    Block<float> out(shape);
    for (size_t k = 0; k < bands_.size(); ++k)
      std::copy_n(all.data.begin() + bands_[k] * n, n, out.data.begin() + static_cast<int64_t>(k) * n);
    return out;
  }

 private:
  std::unique_ptr<ImageSource> source_;
  std::vector<int> bands_;
  ImageInfo info_;
};

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

// "--bands 1,2,3,3": the input's bands in order, the last repeated (or cut) to `want`.
std::string bands_example(int have, int want) {
  std::string s;
  for (int k = 0; k < want; ++k) s += (k ? "," : "") + std::to_string(std::min(k + 1, have));
  return "--bands " + s;
}

void warn(const std::string& input, const std::string& check, const std::string& message) {
  std::fprintf(stderr, "infer: warning: %s: %s check: %s\n", input.c_str(), check.c_str(), message.c_str());
}

// The input's 1st-99th percentile range against the training images', per channel: another
// scale (width 4x apart) or another place (centres a training width apart) is another kind of
// image (a CT model on an MR volume, 16-bit reflectances into an 8-bit model).
void check_intensity(const CheckpointMeta& meta, const std::string& modality, const ImageSource& image) {
  const TrainingInputs& trained = meta.inputs;
  if (trained.low.size() != size_t(image.info().channels)) return;  // not stored (older checkpoint)
  const std::vector<io::IntensityRange> ranges = io::intensity_ranges(image);
  for (size_t c = 0; c < ranges.size(); ++c) {
    const double tw = trained.high[c] - trained.low[c], iw = ranges[c].high - ranges[c].low;
    if (!(tw > 0) || !std::isfinite(iw)) continue;
    const double shift = std::abs((ranges[c].high + ranges[c].low) - (trained.high[c] + trained.low[c])) / 2 / tw;
    const double ratio = iw / tw;
    if (ratio >= 0.25 && ratio <= 4 && shift <= 1) continue;
    // What the model was trained on: the modality, or CT for a CT normalisation (Hounsfield units).
    const std::string trained_on = !trained.modality.empty() ? trained.modality : meta.norm.kind == "ct" ? "CT" : "";
    const std::string kind = trained_on.empty() ? "" : trained_on + " ";
    warn(image.info().path, "intensity",
         "channel " + std::to_string(c + 1) + " spans [" + number(ranges[c].low) + ", " + number(ranges[c].high) +
             "] (1st-99th percentile) but the model was trained on " + kind + "values in [" + number(trained.low[c]) +
             ", " + number(trained.high[c]) + "]" + (modality.empty() ? "" : "; this image is " + modality) +
             ": its labels are likely meaningless. Use a model trained on this kind of image, or bring the input to "
             "the training range (units, scaling, band order: --bands)");
    return;  // one warning per image
  }
}

void check_modality(const TrainingInputs& trained, const std::string& modality, const std::string& input) {
  if (trained.modality.empty() || modality.empty() || trained.modality == modality) return;
  warn(input, "modality",
       "the image is " + modality + " but the model was trained on " + trained.modality +
           ": use a model trained on " + modality);
}

// Pixel/voxel size against the training images' (when the model does not resample inputs to
// its own spacing): objects 2x larger or smaller than the network saw.
void check_spacing(const CheckpointMeta& meta, const ImageSource& image) {
  if (meta.resampling.enabled() || meta.inputs.spacing.empty()) return;
  const io::GridSpacing s = io::grid_spacing(image.info());
  if (s.unit != meta.inputs.spacing_unit || s.step.size() != meta.inputs.spacing.size() || s.unit == "pixel") return;
  double worst = 1;
  for (size_t k = 0; k < s.step.size(); ++k) {
    const double r = s.step[k] / meta.inputs.spacing[k];
    if (r > 0 && std::isfinite(r)) worst = std::max({worst, r, 1 / r});
  }
  if (worst <= 2) return;
  auto sizes = [&](const std::vector<double>& v) {
    std::string t;
    for (size_t k = v.size(); k-- > 0;) t += number(v[k]) + (k ? " x " : "");  // x first
    return t + " " + s.unit;
  };
  warn(image.info().path, "spacing",
       "pixel size " + sizes(s.step) + " but the model was trained at " + sizes(meta.inputs.spacing) + " (" +
           number(worst) + "x apart): objects appear at another scale; resample the input to the training pixel size "
           "(e.g. gdalwarp -tr) or train at this one");
}

}  // namespace

std::unique_ptr<ImageSource> select_bands(std::unique_ptr<ImageSource> image, const std::vector<int>& bands) {
  if (bands.empty()) return image;
  const int have = image->info().channels;
  std::vector<int> zero_based;
  for (int b : bands) {
    if (b < 1 || b > have)
      throw Error("--bands: band " + std::to_string(b) + " is not one of " + image->info().path + "'s bands 1.." +
                  std::to_string(have));
    zero_based.push_back(b - 1);
  }
  return std::make_unique<BandSelection>(std::move(image), std::move(zero_based));
}

void check_input(const InferOptions& o, const Model& model, const ImageSource& image, const std::string& modality,
                 bool report) {
  if (!model.loaded.net) return;  // init random: the network follows the input
  const CheckpointMeta& meta = model.loaded.meta;
  const int have = image.info().channels, want = static_cast<int>(meta.model.in_channels);
  if (have != want)
    throw Error(image.info().path + ": has " + std::to_string(have) + (o.bands.empty() ? " bands" : " bands with --bands") +
                " but the model expects " + std::to_string(want) + " (it was trained on " + std::to_string(want) +
                "-channel images); choose the model's channels from the input's bands, 1-based, in the order of the "
                "training images' bands: " + bands_example(o.bands.empty() ? have : int(o.bands.size()), want));
  if (!report) return;
  check_modality(meta.inputs, modality, image.info().path);
  check_intensity(meta, modality, image);
  check_spacing(meta, image);
}

}  // namespace tessera::engine::infer
