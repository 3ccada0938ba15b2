#include "color_table.hpp"

#include "tessera/io/label_sidecars.hpp"

namespace tessera::gui {

namespace {

LabelTable table_of(const std::vector<io::LabelEntry>& entries) {
  LabelTable t;
  for (const io::LabelEntry& e : entries) {  // the one codec: io/label_sidecars.hpp
    if (e.value < 0 || e.value > 255) continue;
    t.names[size_t(e.value)] = e.name;
    t.colors[size_t(e.value)] = qRgb(e.color[0], e.color[1], e.color[2]);
    t.visible[size_t(e.value)] = e.visible;
    ++t.entries;
  }
  return t;
}

}  // namespace

LabelTable load_label_table(const std::string& path) { return table_of(io::read_label_table(path)); }

std::optional<LabelTable> label_volume_table(const std::string& volume) {
  const auto entries = io::read_label_sidecars(volume);
  if (!entries) return std::nullopt;
  return table_of(*entries);
}

}  // namespace tessera::gui
