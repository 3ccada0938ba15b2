#include "tessera/core/colors.hpp"

#include <cctype>
#include <cstdio>
#include <sstream>

namespace tessera {

Rgb label_color(int label) {
  // Paul Tol's "bright" qualitative scheme (colour-blind safe), then his "muted" extras.
  static constexpr Rgb kTable[] = {
      {68, 119, 170},   // 0 blue
      {238, 102, 119},  // 1 red
      {34, 136, 51},    // 2 green
      {204, 187, 68},   // 3 yellow
      {102, 204, 238},  // 4 cyan
      {170, 51, 119},   // 5 purple
      {187, 187, 187},  // 6 grey
      {221, 170, 51},   // 7 ochre
  };
  if (label >= 0 && label < static_cast<int>(std::size(kTable))) return kTable[label];
  const uint32_t h = static_cast<uint32_t>(label) * 2654435761u;
  return {static_cast<uint8_t>(64 + (h >> 24) % 192), static_cast<uint8_t>(64 + (h >> 16) % 192),
          static_cast<uint8_t>(64 + (h >> 8) % 192)};
}

std::optional<Rgb> parse_hex_color(const std::string& text) {
  if (text.size() != 7 || text[0] != '#') return std::nullopt;
  Rgb c{};
  for (size_t k = 0; k < 3; ++k) {
    const std::string pair = text.substr(1 + 2 * k, 2);
    if (!std::isxdigit(static_cast<unsigned char>(pair[0])) || !std::isxdigit(static_cast<unsigned char>(pair[1])))
      return std::nullopt;
    c[k] = static_cast<uint8_t>(std::stoi(pair, nullptr, 16));
  }
  return c;
}

std::string hex_color(const Rgb& c) {
  char text[8];
  std::snprintf(text, sizeof text, "#%02x%02x%02x", c[0], c[1], c[2]);
  return text;
}

Rgb default_class_color(const std::string& name, int id) {
  struct Named {
    const char* word;
    Rgb color;
  };
  static constexpr Named kNamed[] = {
      {"water", {31, 120, 180}},      {"sea", {31, 120, 180}},         {"river", {31, 120, 180}},
      {"lake", {31, 120, 180}},       {"vegetation", {51, 160, 44}},   {"forest", {27, 94, 32}},
      {"tree", {27, 94, 32}},         {"trees", {27, 94, 32}},         {"grass", {124, 179, 66}},
      {"crop", {205, 220, 57}},       {"cropland", {205, 220, 57}},    {"building", {227, 26, 28}},
      {"buildings", {227, 26, 28}},   {"road", {120, 120, 120}},       {"roads", {120, 120, 120}},
      {"bare", {191, 160, 110}},      {"soil", {191, 160, 110}},       {"snow", {240, 240, 240}},
      {"cloud", {220, 220, 220}},     {"clouds", {220, 220, 220}},     {"background", {0, 0, 0}},
      {"liver", {221, 130, 101}},     {"spleen", {157, 108, 162}},     {"kidney", {185, 102, 83}},
      {"tumor", {230, 220, 70}},      {"tumour", {230, 220, 70}},      {"lesion", {230, 220, 70}},
      {"bone", {241, 214, 145}},      {"lung", {197, 165, 145}},       {"heart", {206, 110, 84}},
  };
  std::string lower;
  for (char ch : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::istringstream words(lower);
  for (std::string w; words >> w;)
    for (const Named& n : kNamed)
      if (w == n.word) return n.color;
  return label_color(id);
}

Rgb class_color(const std::vector<Rgb>& colors, int id) {
  return id >= 0 && static_cast<size_t>(id) < colors.size() ? colors[static_cast<size_t>(id)] : label_color(id);
}

std::string describe_classes(const std::vector<std::string>& names, const std::vector<Rgb>& colors,
                             const std::string& background) {
  std::string s = "classes:";
  for (size_t k = 0; k < names.size(); ++k)
    s += (k ? ", " : " ") + std::to_string(k) + " " + names[k] + " " + hex_color(class_color(colors, int(k)));
  return s + "; background: " +
         (background == "none" ? "none (class 0 is a class like the others)"
                               : "0 (class 0 is left out of overlays and polygons; data.background: none keeps it)");
}

}  // namespace tessera
