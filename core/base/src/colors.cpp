#include "tessera/core/colors.hpp"

namespace tessera {

Rgb label_color(int label) {
  static constexpr Rgb kTable[] = {
      {46, 125, 50},   // 0 background / vegetation
      {229, 57, 53},   // 1
      {255, 235, 59},  // 2
      {30, 136, 229},  // 3
      {142, 36, 170},  // 4
      {255, 152, 0},   // 5
      {0, 172, 193},   // 6
      {216, 27, 96},   // 7
  };
  if (label >= 0 && label < static_cast<int>(std::size(kTable))) return kTable[label];
  const uint32_t h = static_cast<uint32_t>(label) * 2654435761u;
  return {static_cast<uint8_t>(64 + (h >> 24) % 192), static_cast<uint8_t>(64 + (h >> 16) % 192),
          static_cast<uint8_t>(64 + (h >> 8) % 192)};
}

}  // namespace tessera
