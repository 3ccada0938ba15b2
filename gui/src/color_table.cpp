#include "color_table.hpp"

#include <fstream>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera::gui {

LabelTable load_label_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open colour table");
  LabelTable t;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const auto hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream s(line);
    int id = -1, r = 0, g = 0, b = 0;
    std::string name;
    const auto quote = line.find('"');
    if (quote != std::string::npos) {  // ITK-SNAP
      double a = 1;
      int vis = 1, mesh = 1;
      s >> id >> r >> g >> b >> a >> vis >> mesh;
      const auto end = line.find('"', quote + 1);
      if (!s || end == std::string::npos) throw Error(path + ": line " + std::to_string(number) + ": not an ITK-SNAP label line");
      name = line.substr(quote + 1, end - quote - 1);
    } else {  // Slicer
      int a = 255;
      s >> id >> name >> r >> g >> b;
      if (!s) throw Error(path + ": line " + std::to_string(number) + ": expected 'id name R G B A'");
      s >> a;
    }
    if (id < 0 || id > 255) continue;
    t.names[size_t(id)] = name;
    t.colors[size_t(id)] = qRgb(r, g, b);
    ++t.entries;
  }
  if (t.entries == 0) throw Error(path + ": no label entries");
  return t;
}

}  // namespace tessera::gui
