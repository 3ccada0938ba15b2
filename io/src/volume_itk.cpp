// ITK glue shared by the volume files (see volume_itk.hpp): errors, ITK's exception text,
// geometry between tessera and ITK.
#include "volume_itk.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace tessera::io::detail {

void fail(const std::string& path, const std::string& problem) { throw Error(path + ": " + problem); }

// ITK descriptions look like "ITK ERROR: NiftiImageIO(0x55d0): reason\n more"; keep the
// reason, on one line, short enough for a log line.
std::string short_reason(const itk::ExceptionObject& e) {
  std::string text = e.GetDescription();
  if (text.rfind("ITK ERROR:", 0) == 0) {
    const auto close = text.find("): ");
    if (close != std::string::npos) text = text.substr(close + 3);
  }
  std::string out;
  for (char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  // Teem (NRRD) chains "[nrrd] caller: trouble [nrrd] callee: reason"; the reason is last.
  if (const auto last = out.rfind("[nrrd] "); last != std::string::npos) {
    out = out.substr(last + 7);
    const auto colon = out.find(": ");
    if (colon != std::string::npos && out.find(' ') > colon) out = out.substr(colon + 2);
  }
  constexpr size_t kMaxLength = 240;
  if (out.size() > kMaxLength) out = out.substr(0, kMaxLength - 3) + "...";
  return out.empty() ? "ITK error" : out;
}

void quiet_itk() {
  static const bool once = [] {
    itk::Object::GlobalWarningDisplayOff();
    return true;
  }();
  (void)once;
}

Georeference complete_volume_geometry(Georeference geo) {
  if (geo.spacing.empty()) geo.spacing = {1.0, 1.0, 1.0};
  if (geo.origin.empty()) geo.origin = {0.0, 0.0, 0.0};
  if (geo.direction.empty()) geo.direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  TESSERA_CHECK(geo.spacing.size() == 3 && geo.origin.size() == 3 && geo.direction.size() == 9);
  return geo;
}

int64_t voxel_count(const Index& extent) {
  int64_t n = 1;
  for (int64_t e : extent) n *= e;
  return n;
}

void check_volume_extent(const Index& extent) {
  TESSERA_CHECK(extent.size() == 3);
  for (int64_t e : extent) TESSERA_CHECK(e > 0);
}

void paste_labels(std::vector<uint8_t>& volume, const Index& extent, const Box& box, const Block<uint8_t>& labels) {
  TESSERA_CHECK(inside(box, extent));
  const int64_t dz = box.size[0], dy = box.size[1], dx = box.size[2];
  TESSERA_CHECK((labels.shape == Index{1, dz, dy, dx}));
  const int64_t ny = extent[1], nx = extent[2];
  for (int64_t z = 0; z < dz; ++z)
    for (int64_t y = 0; y < dy; ++y) {
      const auto src = labels.data.begin() + (z * dy + y) * dx;
      std::copy(src, src + dx, volume.begin() + ((box.origin[0] + z) * ny + box.origin[1] + y) * nx + box.origin[2]);
    }
}

bool inside(const Box& box, const Index& extent) {
  if (box.origin.size() != 3 || box.size.size() != 3) return false;
  for (size_t i = 0; i < 3; ++i) {
    if (box.origin[i] < 0 || box.size[i] < 0 || box.origin[i] + box.size[i] > extent[i]) return false;
  }
  return true;
}

Georeference geometry_of(const Image3<float>& image) {
  Georeference geo;
  for (unsigned r = 0; r < 3; ++r) {
    geo.spacing.push_back(image.GetSpacing()[r]);
    geo.origin.push_back(image.GetOrigin()[r]);
    for (unsigned c = 0; c < 3; ++c) geo.direction.push_back(image.GetDirection()(r, c));
  }
  return geo;
}

}  // namespace tessera::io::detail
