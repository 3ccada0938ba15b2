// Volumes and labels onto another voxel grid with ITK's ResampleImageFilter (see
// tessera/io/resample.hpp): the grids, the in-memory result, and the label sink that
// resamples on commit.
#include "tessera/io/resample.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <new>

#include <itkLinearInterpolateImageFunction.h>
#include <itkNearestNeighborExtrapolateImageFunction.h>
#include <itkNearestNeighborInterpolateImageFunction.h>
#include <itkResampleImageFilter.h>

#include "volume_itk.hpp"

namespace tessera::io {
using detail::fail;
using detail::Image3;
using tessera::to_string;  // Index; io::to_string(Interpolation) would hide it

namespace {

constexpr const char* kAxisNames[3] = {"x", "y", "z"};

// A number as a user typed it: "0.7", "-1", "nan".
std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

bool nearly_equal(double a, double b) {
  return std::abs(a - b) <= 1e-6 * std::max({1.0, std::abs(a), std::abs(b)});
}

bool nearly_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](double x, double y) { return nearly_equal(x, y); });
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Grids handed to the resampling functions come from grid_of / resampled_grid.
void check_grid(const VolumeGrid& g) {
  detail::check_volume_extent(g.extent);
  TESSERA_CHECK(g.geo.spacing.size() == 3 && g.geo.origin.size() == 3 && g.geo.direction.size() == 9);
}

// The permutation (physical axis r <- index axis best[r]) closest to a direction (row-major:
// column c is index axis c in LPS).
std::array<int, 3> nearest_axes(const std::vector<double>& d) {
  std::array<int, 3> axes{0, 1, 2}, best = axes;
  double best_weight = -1;
  do {
    const double weight = std::abs(d[size_t(axes[0])]) + std::abs(d[size_t(3 + axes[1])]) + std::abs(d[size_t(6 + axes[2])]);
    if (weight > best_weight) best_weight = weight, best = axes;
  } while (std::next_permutation(axes.begin(), axes.end()));
  return best;
}

// `input` onto `to`: identity transform in physical space, the output grid set term by term;
// outside the input the nearest edge voxel (ITK would otherwise write 0 there).
template <class T>
typename Image3<T>::Pointer resample_image(const typename Image3<T>::Pointer& input, const VolumeGrid& to, Interpolation how) {
  using Filter = itk::ResampleImageFilter<Image3<T>, Image3<T>, double>;
  auto filter = Filter::New();
  filter->SetInput(input);
  if (how == Interpolation::kLinear)
    filter->SetInterpolator(itk::LinearInterpolateImageFunction<Image3<T>, double>::New());
  else
    filter->SetInterpolator(itk::NearestNeighborInterpolateImageFunction<Image3<T>, double>::New());
  filter->SetExtrapolator(itk::NearestNeighborExtrapolateImageFunction<Image3<T>, double>::New());
  typename Image3<T>::SizeType size;
  typename Image3<T>::IndexType start;
  typename Image3<T>::SpacingType spacing;
  typename Image3<T>::PointType origin;
  typename Image3<T>::DirectionType direction;
  for (unsigned r = 0; r < 3; ++r) {
    size[r] = static_cast<itk::SizeValueType>(to.extent[2 - r]);  // ITK (x, y, z) from (z, y, x)
    start[r] = 0;
    spacing[r] = to.geo.spacing[r];
    origin[r] = to.geo.origin[r];
    for (unsigned c = 0; c < 3; ++c) direction(r, c) = to.geo.direction[3 * r + c];
  }
  filter->SetSize(size);
  filter->SetOutputStartIndex(start);
  filter->SetOutputSpacing(spacing);
  filter->SetOutputOrigin(origin);
  filter->SetOutputDirection(direction);
  filter->Update();
  return filter->GetOutput();
}

// One channel (x fastest) on `from` onto `to`, appended to `out`.
template <class T>
void resample_channel(const T* voxels, const VolumeGrid& from, const VolumeGrid& to, Interpolation how, std::vector<T>& out) {
  auto input = detail::make_image<T>(from.extent, from.geo);
  std::copy(voxels, voxels + detail::voxel_count(from.extent), input->GetBufferPointer());
  const auto output = resample_image<T>(input, to, how);
  const T* result = output->GetBufferPointer();
  out.insert(out.end(), result, result + detail::voxel_count(to.extent));
}

}  // namespace

// ---- interpolation and grids ----------------------------------------------------------

Interpolation parse_interpolation(const std::string& s) {
  if (s == "nearest") return Interpolation::kNearest;
  if (s == "linear") return Interpolation::kLinear;
  throw Error("interpolation '" + s + "': expected nearest or linear");
}

std::string to_string(Interpolation i) { return i == Interpolation::kLinear ? "linear" : "nearest"; }

bool VolumeGrid::operator==(const VolumeGrid& other) const {
  return extent == other.extent && nearly_equal(geo.spacing, other.geo.spacing) &&
         nearly_equal(geo.origin, other.geo.origin) && nearly_equal(geo.direction, other.geo.direction);
}

VolumeGrid grid_of(const ImageInfo& info) {
  if (info.kind != "volume") fail(info.path, "not a volume (kind '" + info.kind + "'); resampling needs a 3-D volume");
  const bool positive = std::all_of(info.extent.begin(), info.extent.end(), [](int64_t e) { return e > 0; });
  if (info.extent.size() != 3 || !positive)
    fail(info.path, "a volume needs a (z, y, x) extent of positive sizes, not " + to_string(info.extent));
  const Georeference& geo = info.geo;
  if (geo.spacing.size() != 3 || geo.origin.size() != 3 || geo.direction.size() != 9)
    fail(info.path, "volume geometry incomplete: " + std::to_string(geo.spacing.size()) + " spacing, " +
                        std::to_string(geo.origin.size()) + " origin, " + std::to_string(geo.direction.size()) +
                        " direction terms (expected 3, 3, 9)");
  for (double s : geo.spacing)
    if (!(std::isfinite(s) && s > 0)) fail(info.path, "volume spacing " + number(s) + " is not a positive finite number of mm");
  if (!all_finite(geo.origin) || !all_finite(geo.direction)) fail(info.path, "volume origin or direction is not finite");
  return VolumeGrid{info.extent, geo};
}

// nnU-Net's compute_new_shape: round(old / new * n) with Python's round (half to even), which
// std::nearbyint does in the default rounding mode; the same order of operations too.
VolumeGrid resampled_grid(const VolumeGrid& grid, const std::vector<double>& spacing) {
  check_grid(grid);
  if (spacing.size() != 3) {
    std::string values;
    for (double s : spacing) values += (values.empty() ? "" : ", ") + number(s);
    throw Error("resample spacing (" + values + "): " + std::to_string(spacing.size()) +
                " values, expected 3 (x, y, z mm)");
  }
  VolumeGrid out = grid;
  double voxels = 1.0;
  for (int a = 0; a < 3; ++a) {
    const double s = spacing[a];
    if (!(std::isfinite(s) && s > 0))
      throw Error("resample spacing " + number(s) + " (" + kAxisNames[a] + "): not a positive finite number of mm");
    const double n = std::max(1.0, std::nearbyint(grid.geo.spacing[a] / s * static_cast<double>(grid.extent[2 - a])));
    voxels *= n;
    if (!(voxels < 0x1p62))
      throw Error("resample spacing " + number(s) + " (" + kAxisNames[a] + "): the grid would have too many voxels");
    out.extent[2 - a] = static_cast<int64_t>(n);
    out.geo.spacing[a] = s;
  }
  return out;
}

VolumeGrid axis_aligned_grid(const VolumeGrid& grid) {
  check_grid(grid);
  const std::vector<double>& d = grid.geo.direction;
  const std::array<int, 3> best = nearest_axes(d);
  VolumeGrid out = grid;
  std::array<double, 3> corner{0, 0, 0};  // index of the voxel nearest the -x, -y, -z corner
  for (size_t r = 0; r < 3; ++r) {
    const size_t c = size_t(best[r]);
    out.geo.spacing[r] = grid.geo.spacing[c];
    out.extent[2 - r] = grid.extent[2 - c];
    if (d[3 * r + c] < 0) corner[c] = static_cast<double>(grid.extent[2 - c] - 1);
  }
  for (size_t r = 0; r < 3; ++r) {
    out.geo.origin[r] = grid.geo.origin[r];
    for (size_t c = 0; c < 3; ++c) out.geo.origin[r] += d[3 * r + c] * grid.geo.spacing[c] * corner[c];
  }
  out.geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  return out;
}

Box box_from_axis_aligned(const VolumeGrid& grid, const Box& aligned) {
  check_grid(grid);
  const std::vector<double>& d = grid.geo.direction;
  const std::array<int, 3> best = nearest_axes(d);
  TESSERA_CHECK(aligned.origin.size() == 3 && aligned.size.size() == 3);
  Box out{Index(3, 0), Index(3, 0)};
  for (size_t r = 0; r < 3; ++r) {  // physical axis r is index axis c; Box axes are (z, y, x)
    const size_t c = size_t(best[r]);
    const int64_t n = grid.extent[2 - c], from = aligned.origin[2 - r], size = aligned.size[2 - r];
    TESSERA_CHECK(from >= 0 && size >= 0 && from + size <= n);
    out.origin[2 - c] = d[3 * r + c] < 0 ? n - from - size : from;
    out.size[2 - c] = size;
  }
  return out;
}

// ---- MemoryVolume ---------------------------------------------------------------------

MemoryVolume::MemoryVolume(ImageInfo info, std::vector<float> voxels) : info_(std::move(info)), voxels_(std::move(voxels)) {
  detail::check_volume_extent(info_.extent);
  TESSERA_CHECK(info_.channels >= 1);
  TESSERA_CHECK(static_cast<int64_t>(voxels_.size()) == info_.channels * detail::voxel_count(info_.extent));
}

Block<float> MemoryVolume::read(const Box& box) const {
  TESSERA_CHECK(detail::inside(box, info_.extent));
  const int64_t dz = box.size[0], dy = box.size[1], dx = box.size[2];
  const int64_t nz = info_.extent[0], ny = info_.extent[1], nx = info_.extent[2];
  Block<float> out(Index{info_.channels, dz, dy, dx});
  for (int64_t c = 0; c < info_.channels; ++c)
    for (int64_t z = 0; z < dz; ++z)
      for (int64_t y = 0; y < dy; ++y) {
        const auto src = voxels_.begin() + (((c * nz + box.origin[0] + z) * ny + box.origin[1] + y) * nx + box.origin[2]);
        std::copy(src, src + dx, out.data.begin() + ((c * dz + z) * dy + y) * dx);
      }
  return out;
}

// ---- resampling -----------------------------------------------------------------------

std::unique_ptr<MemoryVolume> resample_volume(const ImageSource& volume, const VolumeGrid& grid, Interpolation how) {
  check_grid(grid);
  const ImageInfo& in = volume.info();
  const VolumeGrid from = grid_of(in);
  detail::quiet_itk();
  ImageInfo info = in;
  info.extent = grid.extent;
  info.geo = grid.geo;
  if (how == Interpolation::kLinear) info.data_type = "Float32";
  std::vector<float> voxels;
  try {
    const Block<float> source = volume.read(Box{Index{0, 0, 0}, from.extent});
    const int64_t per_channel = detail::voxel_count(from.extent);
    voxels.reserve(static_cast<size_t>(in.channels * detail::voxel_count(grid.extent)));
    for (int c = 0; c < in.channels; ++c) resample_channel<float>(source.data.data() + c * per_channel, from, grid, how, voxels);
  } catch (const itk::ExceptionObject& e) {
    fail(in.path, "cannot resample volume: " + detail::short_reason(e));
  } catch (const std::bad_alloc&) {
    fail(in.path, "cannot resample volume onto " + to_string(grid.extent) + " voxels: out of memory");
  }
  return std::make_unique<MemoryVolume>(std::move(info), std::move(voxels));
}

std::vector<uint8_t> resample_labels(const std::vector<uint8_t>& labels, const VolumeGrid& from, const VolumeGrid& to) {
  check_grid(from);
  check_grid(to);
  TESSERA_CHECK(static_cast<int64_t>(labels.size()) == detail::voxel_count(from.extent));
  detail::quiet_itk();
  std::vector<uint8_t> out;
  try {
    out.reserve(static_cast<size_t>(detail::voxel_count(to.extent)));
    resample_channel<uint8_t>(labels.data(), from, to, Interpolation::kNearest, out);
  } catch (const itk::ExceptionObject& e) {
    throw Error("labels onto " + to_string(to.extent) + " voxels: cannot resample: " + detail::short_reason(e));
  } catch (const std::bad_alloc&) {
    throw Error("labels onto " + to_string(to.extent) + " voxels: cannot resample: out of memory");
  }
  return out;
}

// ---- probabilities back onto the input's grid ----------------------------------------

std::vector<uint8_t> argmax_resampled(const std::vector<float>& probabilities, int classes, const VolumeGrid& from,
                                      const VolumeGrid& to, uint8_t nodata) {
  check_grid(from);
  check_grid(to);
  TESSERA_CHECK(classes >= 1 && classes <= 255);
  const int64_t n_from = detail::voxel_count(from.extent), n_to = detail::voxel_count(to.extent);
  TESSERA_CHECK(static_cast<int64_t>(probabilities.size()) == classes * n_from);
  detail::quiet_itk();
  std::vector<uint8_t> labels;
  try {
    std::vector<float> best(static_cast<size_t>(n_to), -std::numeric_limits<float>::infinity()), on_to;
    labels.assign(static_cast<size_t>(n_to), 0);
    on_to.reserve(static_cast<size_t>(n_to));
    for (int c = 0; c < classes; ++c) {
      on_to.clear();
      resample_channel<float>(probabilities.data() + c * n_from, from, to, Interpolation::kLinear, on_to);
      for (int64_t i = 0; i < n_to; ++i) {
        const float p = on_to[static_cast<size_t>(i)];
        if (std::isnan(p)) labels[static_cast<size_t>(i)] = nodata, best[static_cast<size_t>(i)] = NAN;
        else if (p > best[static_cast<size_t>(i)]) best[static_cast<size_t>(i)] = p, labels[static_cast<size_t>(i)] = uint8_t(c);
      }
    }
  } catch (const itk::ExceptionObject& e) {
    throw Error("probabilities onto " + to_string(to.extent) + " voxels: cannot resample: " + detail::short_reason(e));
  } catch (const std::bad_alloc&) {
    throw Error("probabilities onto " + to_string(to.extent) + " voxels: cannot resample: out of memory");
  }
  return labels;
}

ResamplingProbabilitySink::ResamplingProbabilitySink(std::unique_ptr<LabelSink> inner, int classes, VolumeGrid from,
                                                     VolumeGrid to, uint8_t nodata)
    : inner_(std::move(inner)), classes_(classes), from_(std::move(from)), to_(std::move(to)), nodata_(nodata) {
  TESSERA_CHECK(inner_ != nullptr);
  TESSERA_CHECK(classes_ >= 1 && classes_ <= 255);
  check_grid(from_);
  check_grid(to_);
  probabilities_.assign(static_cast<size_t>(classes_ * detail::voxel_count(from_.extent)),
                        std::numeric_limits<float>::quiet_NaN());
}

void ResamplingProbabilitySink::write(const Box& box, const Block<float>& probabilities) {
  TESSERA_CHECK(!committed_);
  TESSERA_CHECK(detail::inside(box, from_.extent));
  const int64_t dz = box.size[0], dy = box.size[1], dx = box.size[2];
  TESSERA_CHECK((probabilities.shape == Index{classes_, dz, dy, dx}));
  const int64_t nz = from_.extent[0], ny = from_.extent[1], nx = from_.extent[2];
  for (int64_t c = 0; c < classes_; ++c)
    for (int64_t z = 0; z < dz; ++z)
      for (int64_t y = 0; y < dy; ++y) {
        const auto src = probabilities.data.begin() + ((c * dz + z) * dy + y) * dx;
        std::copy(src, src + dx,
                  probabilities_.begin() + (((c * nz + box.origin[0] + z) * ny + box.origin[1] + y) * nx + box.origin[2]));
      }
}

void ResamplingProbabilitySink::commit() {
  TESSERA_CHECK(!committed_);
  Block<uint8_t> block(Index{1, to_.extent[0], to_.extent[1], to_.extent[2]});
  block.data = argmax_resampled(probabilities_, classes_, from_, to_, nodata_);
  inner_->write(Box{Index{0, 0, 0}, to_.extent}, block);
  inner_->commit();
  committed_ = true;
}

}  // namespace tessera::io
