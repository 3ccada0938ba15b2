#include "readout.hpp"

#include <cmath>

namespace tessera::gui {

std::array<double, 2> pixel_center_to_map(const std::vector<double>& gt, int x, int y) {
  return pixel_to_map(gt, x + 0.5, y + 0.5);
}

QString label_name(const std::array<std::string, 256>& names, int label) {
  if (label < 0 || label > 255) return {};
  if (!names[size_t(label)].empty()) return QString::fromStdString(names[size_t(label)]);
  if (label == 255) return QStringLiteral("nodata");
  return QStringLiteral("label %1").arg(label);
}

QString label_text(const std::array<std::string, 256>& names, int label) {
  if (label < 0) return {};
  if (names[size_t(label)].empty() && label != 255) return QStringLiteral("label %1").arg(label);
  return QStringLiteral("label %1 %2").arg(label).arg(label_name(names, label));
}

QString format_raster_readout(const RasterMeta& meta, const std::array<std::string, 256>& names, int x, int y,
                              const QVector<double>& values, int label) {
  QStringList parts;
  parts << QStringLiteral("x %1  y %2").arg(x).arg(y);
  QStringList v;
  for (int b = 0; b < values.size(); ++b) {
    const auto& nd = meta.nodata.size() > size_t(b) ? meta.nodata[size_t(b)] : std::nullopt;
    const bool is_nodata = (nd && values[b] == *nd) || std::isnan(values[b]);
    v << QStringLiteral("B%1 %2").arg(b + 1).arg(is_nodata ? QStringLiteral("nodata") : QString::number(values[b], 'g', 7));
  }
  if (!v.isEmpty()) parts << v.join(' ');
  if (label >= 0) parts << label_text(names, label);
  if (meta.geotransform.size() == 6) {
    const auto m = pixel_center_to_map(meta.geotransform, x, y);
    parts << QStringLiteral("X %1  Y %2").arg(m[0], 0, 'f', 3).arg(m[1], 0, 'f', 3);
    if (const auto ll = io::map_to_lonlat(meta.crs_wkt, m[0], m[1]))
      parts << QStringLiteral("lon %1°  lat %2°").arg((*ll)[0], 0, 'f', 6).arg((*ll)[1], 0, 'f', 6);
  }
  return parts.join(QStringLiteral("  |  "));
}

std::array<double, 3> voxel_to_lps(const std::vector<double>& spacing, const std::vector<double>& origin,
                                   const std::vector<double>& direction, int i, int j, int k) {
  const double s[3] = {spacing.size() == 3 ? spacing[0] * i : double(i), spacing.size() == 3 ? spacing[1] * j : double(j),
                       spacing.size() == 3 ? spacing[2] * k : double(k)};
  std::array<double, 3> p{};
  for (int r = 0; r < 3; ++r) {
    double acc = origin.size() == 3 ? origin[size_t(r)] : 0.0;
    for (int c = 0; c < 3; ++c) {
      const double d = direction.size() == 9 ? direction[size_t(r * 3 + c)] : (r == c ? 1.0 : 0.0);
      acc += d * s[c];
    }
    p[size_t(r)] = acc;
  }
  return p;
}

}  // namespace tessera::gui
