#include "tessera/io/hausdorff.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ogr_spatialref.h>

#include <itkBinaryContourImageFilter.h>
#include <itkImage.h>
#include <itkImageRegionConstIterator.h>
#include <itkSignedMaurerDistanceMapImageFilter.h>

#include "tessera/core/error.hpp"

namespace tessera::io {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A class mask cut to `box` (Block axis order) with one background voxel of padding on every
// side, as an ITK image (axis order x, y[, z]: reversed) with the physical spacing.
template <unsigned D>
typename itk::Image<uint8_t, D>::Pointer padded_mask(const Block<uint8_t>& labels, const Box& box, uint8_t class_id,
                                                     const std::vector<double>& spacing) {
  using Image = itk::Image<uint8_t, D>;
  typename Image::SizeType size;
  typename Image::SpacingType itk_spacing;
  for (unsigned a = 0; a < D; ++a) {
    size[a] = static_cast<itk::SizeValueType>(box.size[D - 1 - a] + 2);
    itk_spacing[a] = spacing[D - 1 - a];
  }
  auto image = Image::New();
  image->SetRegions(typename Image::RegionType(size));
  image->SetSpacing(itk_spacing);
  image->Allocate(true);
  uint8_t* out = image->GetBufferPointer();
  // Strides of the labels (without the channel axis) and of the padded image, C order.
  Index in_stride(D, 1), out_stride(D, 1);
  for (int a = int(D) - 2; a >= 0; --a) {
    in_stride[size_t(a)] = in_stride[size_t(a) + 1] * labels.shape[size_t(a) + 2];
    out_stride[size_t(a)] = out_stride[size_t(a) + 1] * (box.size[size_t(a) + 1] + 2);
  }
  const int64_t rows = box.count() / box.size[D - 1];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t in = 0, o = 0, rest = r;
    for (int a = int(D) - 2; a >= 0; --a) {
      const int64_t i = rest % box.size[size_t(a)];
      rest /= box.size[size_t(a)];
      in += (box.origin[size_t(a)] + i) * in_stride[size_t(a)];
      o += (i + 1) * out_stride[size_t(a)];
    }
    in += box.origin[D - 1];
    o += 1;
    for (int64_t x = 0; x < box.size[D - 1]; ++x) out[o + x] = labels.data[size_t(in + x)] == class_id ? 1 : 0;
  }
  return image;
}

// Edge voxels of a 0/1 mask: voxels of the mask with a face-neighbour outside it.
template <unsigned D>
typename itk::Image<uint8_t, D>::Pointer edges_of(const typename itk::Image<uint8_t, D>::Pointer& mask) {
  using Image = itk::Image<uint8_t, D>;
  auto contour = itk::BinaryContourImageFilter<Image, Image>::New();
  contour->SetInput(mask);
  contour->SetFullyConnected(false);  // face connectivity: the cross of scipy's binary_erosion
  contour->SetForegroundValue(1);
  contour->SetBackgroundValue(0);
  contour->Update();
  return contour->GetOutput();
}

// d(a, edges(B)) for every edge voxel a of A, in physical units.
template <unsigned D>
std::vector<double> directed_distances(const typename itk::Image<uint8_t, D>::Pointer& from_edges,
                                       const typename itk::Image<uint8_t, D>::Pointer& to_edges) {
  using Image = itk::Image<uint8_t, D>;
  using Distance = itk::Image<double, D>;
  auto map = itk::SignedMaurerDistanceMapImageFilter<Image, Distance>::New();
  map->SetInput(to_edges);
  map->SetUseImageSpacing(true);
  map->SetSquaredDistance(false);
  map->SetBackgroundValue(0);
  map->Update();
  std::vector<double> out;
  itk::ImageRegionConstIterator<Image> e(from_edges, from_edges->GetLargestPossibleRegion());
  itk::ImageRegionConstIterator<Distance> d(map->GetOutput(), from_edges->GetLargestPossibleRegion());
  for (; !e.IsAtEnd(); ++e, ++d)
    if (e.Get() != 0) out.push_back(std::max(0.0, d.Get()));  // inside the target's edges: 0
  return out;
}

template <unsigned D>
double hausdorff(const Block<uint8_t>& prediction, const Block<uint8_t>& truth, const Box& box, uint8_t class_id,
                 const std::vector<double>& spacing, const HausdorffOptions& o) {
  const auto pred_edges = edges_of<D>(padded_mask<D>(prediction, box, class_id, spacing));
  const auto truth_edges = edges_of<D>(padded_mask<D>(truth, box, class_id, spacing));
  std::vector<double> pt = directed_distances<D>(pred_edges, truth_edges);
  std::vector<double> tp = directed_distances<D>(truth_edges, pred_edges);
  if (o.pooling == HausdorffPooling::kPooled) {
    pt.insert(pt.end(), tp.begin(), tp.end());
    return percentile_linear(pt, o.percentile);
  }
  return std::max(percentile_linear(pt, o.percentile), percentile_linear(tp, o.percentile));
}

}  // namespace

void HausdorffOptions::validate() const {
  if (!(percentile >= 0 && percentile <= 100))
    throw Error("hausdorff.percentile: must be in [0, 100], got " + std::to_string(percentile));
}

double percentile_linear(std::vector<double>& values, double p) {
  if (values.empty()) return kNaN;
  const double pos = (double(values.size()) - 1) * p / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  std::nth_element(values.begin(), values.begin() + std::ptrdiff_t(lo), values.end());
  const double a = values[lo];
  if (hi == lo) return a;
  const double b = *std::min_element(values.begin() + std::ptrdiff_t(lo) + 1, values.end());
  return a + (b - a) * (pos - double(lo));
}

GridSpacing grid_spacing(const ImageInfo& info) {
  const size_t dims = info.extent.size();
  GridSpacing g;
  if (info.kind == "volume") {
    g.unit = "mm";
    for (size_t a = 0; a < dims; ++a)
      g.step.push_back(dims - 1 - a < info.geo.spacing.size() ? info.geo.spacing[dims - 1 - a] : 1.0);
    return g;
  }
  const auto& gt = info.geo.geotransform;
  if (gt.size() != 6) {
    g.unit = "pixel";
    g.step.assign(dims, 1.0);
    return g;
  }
  g.step = {std::hypot(gt[2], gt[5]), std::hypot(gt[1], gt[4])};  // (y, x)
  g.unit = "map unit";
  OGRSpatialReference srs;
  if (!info.geo.crs_wkt.empty() && srs.importFromWkt(info.geo.crs_wkt.c_str()) == OGRERR_NONE) {
    const char* name = nullptr;
    if (srs.IsGeographic()) srs.GetAngularUnits(&name);
    else srs.GetLinearUnits(&name);
    if (name && *name) g.unit = name;
  }
  return g;
}

double hausdorff_distance(const Block<uint8_t>& prediction, const Block<uint8_t>& truth, int class_id,
                          const std::vector<double>& spacing, const HausdorffOptions& options) {
  options.validate();
  if (prediction.shape != truth.shape)
    throw Error("hausdorff: prediction shape " + to_string(prediction.shape) + " differs from the truth's " +
                to_string(truth.shape));
  const size_t dims = truth.shape.size() - 1;
  if (truth.shape.empty() || truth.shape[0] != 1 || (dims != 2 && dims != 3))
    throw Error("hausdorff: labels must be (1, y, x) or (1, z, y, x), got " + to_string(truth.shape));
  if (spacing.size() != dims)
    throw Error("hausdorff: " + std::to_string(spacing.size()) + " spacing values for " + std::to_string(dims) +
                " axes");
  for (double s : spacing)
    if (!(std::isfinite(s) && s > 0)) throw Error("hausdorff: spacing must be positive, got " + std::to_string(s));
  if (class_id < 0 || class_id > 255) throw Error("hausdorff: class " + std::to_string(class_id) + " is not a label");
  const auto c = static_cast<uint8_t>(class_id);

  // Bounding box of the union of both masks; beyond it both are background, so cutting it
  // out (and padding by one voxel) changes neither the edges nor the distances.
  Index lo(dims, std::numeric_limits<int64_t>::max()), hi(dims, -1);
  bool in_pred = false, in_truth = false;
  Index shape(truth.shape.begin() + 1, truth.shape.end());
  Index at(dims, 0);
  for (size_t i = 0; i < truth.data.size(); ++i) {
    const bool p = prediction.data[i] == c, t = truth.data[i] == c;
    if (p || t) {
      in_pred |= p;
      in_truth |= t;
      for (size_t a = 0; a < dims; ++a) {
        lo[a] = std::min(lo[a], at[a]);
        hi[a] = std::max(hi[a], at[a]);
      }
    }
    for (size_t a = dims; a-- > 0;) {  // advance the C-order index
      if (++at[a] < shape[a]) break;
      at[a] = 0;
    }
  }
  if (!in_pred && !in_truth) return kNaN;
  if (!in_pred || !in_truth) return kInf;
  Box box{lo, Index(dims)};
  for (size_t a = 0; a < dims; ++a) box.size[a] = hi[a] - lo[a] + 1;
  return dims == 2 ? hausdorff<2>(prediction, truth, box, c, spacing, options)
                   : hausdorff<3>(prediction, truth, box, c, spacing, options);
}

double hausdorff_distance(const Block<uint8_t>& prediction, const Block<uint8_t>& truth, int class_id,
                          const std::vector<double>& spacing, double percentile) {
  return hausdorff_distance(prediction, truth, class_id, spacing, HausdorffOptions().with_percentile(percentile));
}

}  // namespace tessera::io
