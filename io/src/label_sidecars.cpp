#include "tessera/io/label_sidecars.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/core/error.hpp"
#include "tessera/core/image_source.hpp"
#include "tessera/io/open_image.hpp"
#include "tessera/io/raster.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

// `volume` without its volume extension (the last of them that matches).
std::string stem_of(const std::string& volume) {
  for (const char* ext : {".nii.gz", ".nii", ".nrrd", ".nhdr", ".mha", ".mhd"}) {
    const std::string e = ext;
    if (volume.size() > e.size() && volume.compare(volume.size() - e.size(), e.size(), e) == 0)
      return volume.substr(0, volume.size() - e.size());
  }
  return fs::path(volume).replace_extension().string();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool skipped(const std::string& line) {
  const size_t first = line.find_first_not_of(" \t\r");
  return first == std::string::npos || line[first] == '#';
}

uint8_t channel(int v, const std::string& where) {
  if (v < 0 || v > 255) throw Error(where + ": colour component " + std::to_string(v) + " outside 0..255");
  return static_cast<uint8_t>(v);
}

}  // namespace

std::vector<LabelEntry> label_entries(const LabelStyle& style, const std::array<bool, 256>& present) {
  std::vector<LabelEntry> out;
  for (int id = 0; id < 256; ++id)
    if (id != kNoDataLabel && (id < style.classes || present[size_t(id)]))
      out.push_back({id, style.name(id), style.color(id), !style.is_background(id)});
  return out;
}

std::string itksnap_label_description(const std::vector<LabelEntry>& entries) {
  std::string s =
      "################################################\n"
      "# ITK-SnAP Label Description File (written by Tessera)\n"
      "# File format:\n"
      "# IDX   -R-  -G-  -B-  -A--  VIS MSH  LABEL\n"
      "# Fields:\n"
      "#    IDX:   Zero-based index\n"
      "#    -R-:   Red color component (0..255)\n"
      "#    -G-:   Green color component (0..255)\n"
      "#    -B-:   Blue color component (0..255)\n"
      "#    -A-:   Label transparency (0.00 .. 1.00)\n"
      "#    VIS:   Label visibility (0 or 1)\n"
      "#    MSH:   Label mesh visibility (0 or 1)\n"
      "#  LABEL:   Label description\n"
      "################################################\n";
  for (const LabelEntry& e : entries) {
    std::string name;
    for (char c : e.name) name += c == '"' ? '\'' : c;  // the format has no escape for quotes
    char line[96];
    std::snprintf(line, sizeof line, "%5d %5d %4d %4d %8s %2d %2d    ", e.value, e.color[0], e.color[1], e.color[2],
                  e.visible ? "1" : "0", e.visible ? 1 : 0, e.visible ? 1 : 0);
    s += line + ("\"" + name + "\"\n");
  }
  return s;
}

namespace {

// Each line of `text` that is not blank or a comment, parsed by `entry(line, "NAME:LINE")`.
template <class Parse>
std::vector<LabelEntry> parse_entries(const std::string& text, const std::string& name, Parse entry) {
  std::vector<LabelEntry> out;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (!skipped(line)) out.push_back(entry(line, name + ":" + std::to_string(number)));
  }
  return out;
}

}  // namespace

std::vector<LabelEntry> parse_itksnap_label_description(const std::string& text, const std::string& name) {
  return parse_entries(text, name, [](const std::string& line, const std::string& where) {
    std::istringstream in(line);
    int idx = 0, r = 0, g = 0, b = 0, vis = 0, mesh = 0;
    double alpha = 0;
    const size_t open = line.find('"'), close = line.rfind('"');
    if (!(in >> idx >> r >> g >> b >> alpha >> vis >> mesh) || open == std::string::npos || close == open)
      throw Error(where + ": expected IDX R G B A VIS MSH \"LABEL\" (an ITK-SNAP label description line)");
    return LabelEntry{idx, line.substr(open + 1, close - open - 1),
                      {channel(r, where), channel(g, where), channel(b, where)}, vis != 0 && alpha > 0};
  });
}

std::string slicer_color_table(const std::vector<LabelEntry>& entries, const std::string& title) {
  std::string s = "# Color table file " + title + "\n# " + std::to_string(entries.size()) + " values\n";
  for (const LabelEntry& e : entries) {
    std::string name;
    for (char c : e.name) name += c == ' ' || c == '\t' ? '_' : c;  // the format's rule for spaces
    s += std::to_string(e.value) + " " + (name.empty() ? "unnamed" : name) + " " + std::to_string(e.color[0]) + " " +
         std::to_string(e.color[1]) + " " + std::to_string(e.color[2]) + " " + (e.visible ? "255" : "0") + "\n";
  }
  return s;
}

std::vector<LabelEntry> parse_slicer_color_table(const std::string& text, const std::string& name) {
  return parse_entries(text, name, [](const std::string& line, const std::string& where) {
    std::istringstream in(line);
    int value = 0, r = 0, g = 0, b = 0, a = 0;
    std::string label;
    if (!(in >> value >> label >> r >> g >> b >> a))
      throw Error(where + ": expected \"value name R G B A\" (a 3D Slicer colour table line)");
    for (char& c : label)
      if (c == '_') c = ' ';
    return LabelEntry{value, label, {channel(r, where), channel(g, where), channel(b, where)}, a > 0};
  });
}

std::vector<LabelEntry> read_label_table(const std::string& path) {
  const std::string text = read_text(path);
  bool itksnap = false;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!skipped(line) && line.find('"') != std::string::npos) itksnap = true;
  std::vector<LabelEntry> entries =
      itksnap ? parse_itksnap_label_description(text, path) : parse_slicer_color_table(text, path);
  if (entries.empty()) throw Error(path + ": no label entries");
  return entries;
}

std::string itksnap_sidecar_path(const std::string& volume) { return stem_of(volume) + ".itksnap.txt"; }
std::string slicer_sidecar_path(const std::string& volume) { return stem_of(volume) + "_ColorTable.ctbl"; }

void write_label_sidecars(const std::string& volume, const std::vector<LabelEntry>& entries) {
  const std::string slicer = slicer_sidecar_path(volume);
  write_file_atomically(itksnap_sidecar_path(volume), {itksnap_label_description(entries)});
  write_file_atomically(slicer, {slicer_color_table(entries, fs::path(slicer).filename().string())});
}

std::optional<std::vector<LabelEntry>> read_label_sidecars(const std::string& volume) {
  const std::string itksnap = itksnap_sidecar_path(volume), slicer = slicer_sidecar_path(volume);
  if (fs::exists(itksnap)) return parse_itksnap_label_description(read_text(itksnap), itksnap);
  if (fs::exists(slicer)) return parse_slicer_color_table(read_text(slicer), slicer);
  return std::nullopt;
}

std::vector<std::string> label_class_names(const std::string& path) {
  std::vector<std::string> names;
  if (is_volume_path(path) || fs::is_directory(path)) {
    const auto entries = read_label_sidecars(path);
    if (!entries) return names;
    for (const LabelEntry& e : *entries) {
      if (e.value < 0 || e.value >= kNoDataLabel) continue;
      if (names.size() <= size_t(e.value)) names.resize(size_t(e.value) + 1);
      names[size_t(e.value)] = e.name;
    }
    return names;
  }
  const RasterDescription d = RasterReader(path).describe();
  for (size_t id = 0; id < d.class_names.size(); ++id)
    if (!d.class_names[id].empty()) {
      names.resize(id + 1);
      names[id] = d.class_names[id];
    }
  return names;
}

}  // namespace tessera::io
