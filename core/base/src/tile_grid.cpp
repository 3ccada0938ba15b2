#include "tessera/core/tile_grid.hpp"

#include <algorithm>

#include "tessera/core/error.hpp"

namespace tessera {

void TileGridOptions::validate() const {
  if (image.size() != 2 && image.size() != 3)
    throw Error("tile grid: image must be 2-D or 3-D, got " + std::to_string(image.size()) + " axes");
  for (int64_t n : image)
    if (n <= 0) throw Error("tile grid: image extent " + to_string(image) + " has an empty axis");
  if (alignment < 1) throw Error("tile grid: alignment must be >= 1");
  if (step <= 0 || step % alignment != 0)
    throw Error("tile grid: tile step " + std::to_string(step) + " must be a positive multiple of " +
                std::to_string(alignment) + " (the network's pooling grid)");
  if (remainder < 0) throw Error("tile grid: remainder must be >= 0");
  if (halo < 0) throw Error("tile grid: halo must be >= 0");
}

Index clamped_steps(const Index& image, int64_t step, int64_t alignment) {
  TESSERA_CHECK(alignment >= 1 && step >= 1);
  Index steps;
  for (int64_t n : image) steps.push_back(std::min(step, (n + alignment - 1) / alignment * alignment));
  return steps;
}

TileGrid::TileGrid(TileGridOptions options) : options_(std::move(options)) {
  options_.validate();
  steps_ = clamped_steps(options_.image, options_.step, options_.alignment);
  counts_.resize(options_.image.size());
  total_ = 1;
  for (size_t a = 0; a < counts_.size(); ++a) {
    counts_[a] = (options_.image[a] + steps_[a] - 1) / steps_[a];
    total_ *= counts_[a];
  }
}

Tile TileGrid::tile(int64_t index) const {
  TESSERA_CHECK(index >= 0 && index < total_);
  const int d = dims();
  Tile t;
  t.index = index;
  t.output = {Index(d), Index(d)};
  t.inset = {Index(d), Index(d)};
  t.input = {Index(d), Index(d)};
  int64_t rest = index;
  for (int a = d - 1; a >= 0; --a) {
    const int64_t k = rest % counts_[a];
    rest /= counts_[a];
    const int64_t o = k * steps_[a];
    t.output.origin[a] = o;
    t.output.size[a] = steps_[a] + options_.remainder;
    t.inset.origin[a] = o;
    t.inset.size[a] = std::min(steps_[a], options_.image[a] - o);
    t.input.origin[a] = o - options_.halo;
    t.input.size[a] = steps_[a] + options_.remainder + 2 * options_.halo;
  }
  return t;
}

Index TileGrid::input_sides() const {
  Index sides;
  for (int64_t s : steps_) sides.push_back(s + options_.remainder + 2 * options_.halo);
  return sides;
}

int64_t TileGrid::input_side() const {
  const Index sides = input_sides();
  return *std::max_element(sides.begin(), sides.end());
}

double TileGrid::overhead() const {
  const Index sides = input_sides();
  double read = 1.0, kept = 1.0;
  for (size_t a = 0; a < counts_.size(); ++a) {
    read *= static_cast<double>(counts_[a] * sides[a]);
    kept *= static_cast<double>(options_.image[a]);
  }
  return read / kept;
}

}  // namespace tessera
