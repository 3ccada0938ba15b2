#include "tessera/core/tile_choice.hpp"

#include "tessera/core/memory_model.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/core/tile_grid.hpp"

namespace tessera {
namespace {

int64_t round_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

// Strips are never shorter than this many input pixels where several threads share one
// piece's slab: the 2^17 chosen before kStreamStripPixels fell to 2^15 on measurements with one
// thread a piece (docs/streaming.md, "Memory"); not measured again for shared slabs.
constexpr int64_t kSharedSlabStripPixels = int64_t{1} << 17;

// "1.08x"
std::string times(double f) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2fx", f);
  return s;
}

// "40³" for a cube, "1×64×64" otherwise.
std::string format_extent(const Index& extent) {
  if (std::all_of(extent.begin(), extent.end(), [&](int64_t n) { return n == extent.front(); }))
    return std::to_string(extent.front()) + (extent.size() == 3 ? "³" : "²");
  std::string s;
  for (size_t a = 0; a < extent.size(); ++a) s += (a ? "×" : "") + std::to_string(extent[a]);
  return s;
}

int64_t tile_count(const Index& extent, const Index& steps) {
  int64_t n = 1;
  for (size_t a = 0; a < extent.size(); ++a) n *= (extent[a] + steps[a] - 1) / steps[a];
  return n;
}

// The smallest aligned side cutting each axis into as many tiles as `steps` do: the same
// tiles, evenly sized, so the last one pads the image less (and needs no more memory).
int64_t balanced_side(const Index& extent, const Index& steps, int64_t alignment) {
  int64_t side = alignment;
  for (size_t a = 0; a < extent.size(); ++a) {
    const int64_t tiles = (extent[a] + steps[a] - 1) / steps[a];
    side = std::max(side, round_up((extent[a] + tiles - 1) / tiles, alignment));
  }
  return side;
}

// The prediction, or "does not fit" when the network cannot take the side.
int64_t predict(const TileMemoryModel& model, const Index& steps) {
  try {
    return model(steps);
  } catch (const Error&) {
    return std::numeric_limits<int64_t>::max();
  }
}

TileChoice fixed_tile(const TileChoiceOptions& o, const Index& extent, int64_t alignment) {
  if (o.tile % alignment != 0)
    throw Error("--tile " + std::to_string(o.tile) + ": must be a positive multiple of " + std::to_string(alignment) +
                " for this model (its pooling grid); try " +
                std::to_string(std::max(alignment, o.tile / alignment * alignment)) + " or --tile auto");
  TileChoice c;
  c.steps = clamped_steps(extent, o.tile, alignment);
  c.tile = *std::max_element(c.steps.begin(), c.steps.end());
  c.reason = "--tile " + std::to_string(o.tile);
  if (c.steps != Index(extent.size(), o.tile))
    c.reason += " clamped to the image, " + format_extent(extent) + " rounded up to " + std::to_string(alignment);
  return c;
}

}  // namespace

void TileChoiceOptions::validate() const {
  if (tile < 0) throw Error("--tile " + std::to_string(tile) + ": must be 'auto' or a positive inset side");
  if (memory_budget < 0) throw Error("--memory-budget: must be > 0 bytes");
  if (min_tiles < 1) throw Error("tile choice: min_tiles must be >= 1, got " + std::to_string(min_tiles));
}

int64_t parse_tile_option(const std::string& text) {
  if (text == "auto") return 0;
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v <= 0)
    throw Error("--tile '" + text + "': give 'auto' or a positive inset side in pixels (e.g. 256)");
  return v;
}

int64_t parse_memory_size(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  unit.erase(0, unit.find_first_not_of(' '));
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (!unit.empty() && unit.back() == 'B' && unit.size() > 1) unit.pop_back();  // "GB" → "G", "B" stays
  if (unit.size() == 2 && unit.back() == 'I') unit.pop_back();                 // "GI" (GiB) → "G"
  const std::string units = "BKMGT";
  const size_t power = unit.empty() ? 2 : units.find(unit);  // bare number: MiB
  if (used == 0 || unit.size() > 1 || power == std::string::npos || !(v > 0) || !std::isfinite(v))
    throw Error("--memory-budget '" + text + "': give a size such as 2GiB, 512MiB or a number of MiB");
  const double bytes = v * std::pow(1024.0, double(power));
  if (bytes < 1 || bytes > 9e18) throw Error("--memory-budget '" + text + "': out of range");
  return static_cast<int64_t>(bytes);
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : (v < 10 ? "%.1f %s" : "%.0f %s"), v, units[u]);
  return buf;
}

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemAvailable:", 0) == 0) return std::stoll(line.substr(13)) * 1024;
  throw Error("/proc/meminfo: no MemAvailable field; give --memory-budget");
}

int64_t default_memory_budget(int ranks_on_node) {
  return static_cast<int64_t>(kDefaultMemoryShare * double(available_memory_bytes()) / std::max(1, ranks_on_node));
}

std::string TileChoice::summary() const {
  std::string sides;
  if (std::all_of(steps.begin(), steps.end(), [&](int64_t s) { return s == steps.front(); }))
    sides = std::to_string(steps.front());
  else
    for (size_t a = 0; a < steps.size(); ++a) sides += (a ? "×" : "") + std::to_string(steps[a]);
  return "tile " + sides + " (" + reason + ")";
}

TileChoice choose_tile(const TileChoiceOptions& o, const Index& extent, int64_t alignment,
                       const TileMemoryModel& predicted_bytes) {
  o.validate();
  TESSERA_CHECK(alignment >= 1 && !extent.empty());
  if (o.tile > 0) return fixed_tile(o, extent, alignment);

  TileChoice c;
  c.budget_bytes = o.memory_budget > 0 ? o.memory_budget : default_memory_budget();
  const int64_t top = round_up(*std::max_element(extent.begin(), extent.end()), alignment);
  const std::string budget = format_bytes(c.budget_bytes) + " budget";
  // Largest first: memory grows with the side, so the first that fits is the largest.
  bool tiles_bind = false;
  for (int64_t s = top; s >= alignment; s -= alignment) {
    const Index steps = clamped_steps(extent, s, alignment);
    if (s < top && steps == clamped_steps(extent, s + alignment, alignment)) continue;  // same tile
    if (tile_count(extent, steps) < o.min_tiles && s > alignment) {
      tiles_bind = true;
      continue;
    }
    if (predict(predicted_bytes, steps) > c.budget_bytes) continue;
    c.tile = balanced_side(extent, steps, alignment);
    c.steps = clamped_steps(extent, c.tile, alignment);
    c.predicted_bytes = predict(predicted_bytes, c.steps);
    const int64_t bytes = c.predicted_bytes;
    if (s == top)
      c.reason = "auto: whole image, " + format_extent(extent) + " rounded up to " + std::to_string(alignment) +
                 ", predicted " + format_bytes(bytes) + " of the " + budget;
    else if (tiles_bind && predict(predicted_bytes, clamped_steps(extent, s + alignment, alignment)) <= c.budget_bytes)
      c.reason = "auto: largest leaving " + std::to_string(o.min_tiles) + " tiles, one per rank, predicted " +
                 format_bytes(bytes) + " of the " + budget;
    else
      c.reason = "auto: largest fitting the " + budget + ", predicted " + format_bytes(bytes);
    return c;
  }
  c.steps = clamped_steps(extent, alignment, alignment);
  c.tile = alignment;
  c.predicted_bytes = predict(predicted_bytes, c.steps);
  c.reason = "auto: smallest tile; predicted " + format_bytes(c.predicted_bytes) + " exceeds the " + budget;
  return c;
}

TileChoice choose_tile(const TileChoiceOptions& options, const Index& extent, const UNetOptions& model, int batch,
                       int64_t baseline_bytes) {
  return choose_tile(options, extent, unet_alignment(model), [&](const Index& steps) {
    // The loop reads the next batch while this one runs unless one batch holds every tile.
    return baseline_bytes + inference_bytes(model, steps, batch, tile_count(extent, steps) > batch);
  });
}

double tile_recompute(const UNetOptions& model, const Index& extent, int64_t tile) {
  if (model.padding != Padding::kValid) return 1;
  const TileGrid grid(TileGridOptions(extent)
                          .with_step(tile)
                          .with_remainder(unet_remainder(model))
                          .with_halo(unet_halo(model))
                          .with_alignment(unet_alignment(model)));
  return double(grid.size()) * box_layer_sequence(model, grid.input_sides()).flops() /
         box_layer_sequence(model, unet_whole_input(model, extent)).flops();
}

int64_t band_rows(const UNetOptions& model, const Index& extent, int ranks) {
  if (ranks <= 1) return 0;
  return round_up((extent[0] + ranks - 1) / ranks, unet_alignment(model));
}

double band_recompute(const UNetOptions& model, const Index& extent, int64_t band) {
  if (band <= 0 || band >= extent[0]) return 1;
  double flops = 0;
  for (int64_t first = 0; first < extent[0]; first += band) {
    Index rows = extent;
    rows[0] = std::min(band, extent[0] - first);
    flops += box_layer_sequence(model, unet_whole_input(model, rows)).flops();
  }
  return flops / box_layer_sequence(model, unet_whole_input(model, extent)).flops();
}

namespace {

// `across` cut into at most `count` parts, all but the last ⌈across / count⌉ rounded up to `grid`.
std::vector<int64_t> widths_on_grid(int64_t across, int64_t count, int64_t grid) {
  const int64_t width = std::min(across, round_up((across + count - 1) / count, grid));
  std::vector<int64_t> widths;
  for (int64_t first = 0; first < across; first += width) widths.push_back(std::min(width, across - first));
  return widths;
}

}  // namespace

std::vector<int64_t> column_widths(const UNetOptions& model, const Index& extent, int64_t count) {
  TESSERA_CHECK(count >= 1 && extent.size() >= 2);
  return widths_on_grid(extent[1], count, unet_alignment(model));
}

double column_recompute(const UNetOptions& model, const Index& extent, int64_t count) {
  return groups_recompute(model, extent, 1, count);
}

std::vector<int64_t> group_widths(const UNetOptions& model, const Index& extent, int64_t count) {
  TESSERA_CHECK(count >= 1 && extent.size() >= 2);
  return widths_on_grid(extent[1], count, std::max(kStreamGroupGrid, unet_alignment(model)));
}

double groups_recompute(const UNetOptions& model, const Index& extent, int64_t groups, int64_t columns) {
  if (groups <= 1 && columns <= 1) return 1;
  double flops = 0;
  for (int64_t group_width : group_widths(model, extent, groups)) {
    Index group = extent;
    group[1] = group_width;
    for (int64_t width : column_widths(model, group, columns)) {
      Index piece = extent;
      piece[1] = width;
      flops += box_layer_sequence(model, unet_whole_input(model, piece)).flops();
    }
  }
  return flops / box_layer_sequence(model, unet_whole_input(model, extent)).flops();
}

int64_t stream_groups(const UNetOptions& model, const Index& extent, int64_t columns) {
  for (int64_t groups = kStreamMaxGroups; groups >= 2; --groups)
    if (int64_t(group_widths(model, extent, groups).size()) == groups &&
        groups_recompute(model, extent, groups, columns) <= kStreamColumnRecompute)
      return groups;
  return 1;
}

StreamFootprint columns_footprint(const UNetOptions& model, const Index& extent, int64_t strip, int64_t columns) {
  StreamFootprint sum;
  for (int64_t width : column_widths(model, extent, columns)) {
    Index piece = extent;
    piece[1] = width;
    const StreamFootprint f = stream_footprint(model, unet_whole_input(model, piece), strip);
    sum.carried += f.carried;
    sum.working += f.working;
    sum.window += f.window;
    sum.logits += f.logits;
  }
  sum.bytes = stream_resident_bytes(model, sum.tensors());  // the weights once
  return sum;
}

double stream_time_factor(const UNetOptions& model, const Index& whole_input, int64_t strip, int threads) {
  TESSERA_CHECK(strip >= 1 && threads >= 1 && static_cast<int>(whole_input.size()) == model.dims);
  // The levels' shares of the image's FLOPs; in 3-D each slab slice adds its rows across.
  const LayerSequence seq = box_layer_sequence(model, whole_input);
  const LayerSequence across = unet_layer_sequence(model, whole_input[1]);
  const double overhead = kStreamRowOverhead + kStreamThreadRowOverhead * (threads - 1);
  double total = 0, time = 0;
  for (size_t i = 0; i < seq.layers.size(); ++i) {
    const Layer& l = seq.layers[i];
    double rows = std::max(1.0, double(strip) / double(int64_t{1} << l.level));
    if (model.dims == 3) rows *= double(std::max<int64_t>(1, across.layers[i].out_side));
    total += l.flops;
    time += l.flops * (1 + overhead / rows);
  }
  return total > 0 ? time / total : 1;
}

std::string StripChoice::summary() const {
  return "strips of " + std::to_string(strip) + " rows (" + reason + ")";
}

int64_t stream_columns(const UNetOptions& model, const Index& extent, int threads) {
  for (int pieces = threads; pieces >= 2; --pieces)
    if (threads % pieces == 0 && int64_t(column_widths(model, extent, pieces).size()) == pieces &&
        column_recompute(model, extent, pieces) <= kStreamColumnRecompute)
      return pieces;
  return 1;
}

StripChoice choose_strip(const UNetOptions& model, const Index& extent, int64_t memory_budget, int64_t baseline_bytes,
                         int threads) {
  StripChoice c;
  c.budget_bytes = memory_budget > 0 ? memory_budget : default_memory_budget();
  c.columns = stream_columns(model, extent, threads);
  c.groups = stream_groups(model, extent, c.columns);
  const Index whole = unet_whole_input(model, extent);
  Index group = extent;  // the widest column group: what the stream holds at once
  group[1] = group_widths(model, extent, c.groups).front();
  Index piece = extent;  // the widest column piece: its time per row
  piece[1] = column_widths(model, group, c.columns).front();
  const Index piece_whole = unet_whole_input(model, piece);
  const int per_piece = std::max(1, threads / int(c.columns));
  const double columns = groups_recompute(model, extent, c.groups, c.columns);
  auto time = [&](int64_t strip) { return columns * stream_time_factor(model, piece_whole, strip, per_piece); };
  const int64_t alignment = unet_alignment(model);
  const std::string budget = format_bytes(c.budget_bytes) + " budget";
  const int64_t tallest = round_up(whole[0], alignment);
  int64_t across = 1;
  for (size_t a = 1; a < whole.size(); ++a) across *= whole[a];
  // kStreamStripPixels was measured where each piece runs on one thread; where threads share a
  // piece's slab (narrow images, 3-D) strips stay as tall as kSharedSlabStripPixels allows.
  const int64_t pixels = per_piece == 1 ? kStreamStripPixels : kSharedSlabStripPixels;
  int64_t top = std::max(alignment, std::min(pixels / across, tallest) / alignment * alignment);
  while (top < tallest && time(top) > kStreamTimeTarget) top += alignment;
  const std::string pieces =
      (c.groups > 1 ? std::to_string(c.groups) + " column groups one after another, " : "") +
      (c.columns > 1 ? std::to_string(c.columns) + " column pieces side by side, " : "");
  for (int64_t strip = top; strip >= alignment; strip -= alignment) {
    const StreamFootprint f = columns_footprint(model, group, strip, c.columns);
    c.strip = strip;
    c.predicted_bytes = baseline_bytes + f.bytes;
    c.carried_bytes = f.carried;
    c.predicted_time = time(strip);
    if (c.predicted_bytes <= c.budget_bytes) {
      c.reason = pieces + "predicted " + times(c.predicted_time) + " one pass's time" +
                 (strip < top ? " (the " + std::to_string(top) + " rows for " + times(kStreamTimeTarget) + " do not fit)"
                              : "") +
                 "; " + format_bytes(c.predicted_bytes) + " within the " + budget;
      return c;
    }
  }
  c.reason = pieces + "smallest strip, predicted " + times(c.predicted_time) + " one pass's time; predicted " +
             format_bytes(c.predicted_bytes) + " exceeds the " + budget;
  return c;
}

ModeChoice choose_mode(const UNetOptions& model, const Index& extent, const TileChoice& tile, const StripChoice& strip,
                       int64_t band) {
  ModeChoice m;
  m.tile_time = tile_recompute(model, extent, tile.tile);
  m.stream_time = strip.predicted_time * band_recompute(model, extent, band);
  const std::string times_of = "predicted " + times(m.stream_time) + " one pass's time";
  const std::string tiles = "tiles of " + std::to_string(tile.tile);
  const bool one_tile = tile_count(extent, tile.steps) == 1;
  if (m.stream_time < m.tile_time) {
    m.stream = true;
    m.why = times_of + " against " + times(m.tile_time) + " for " + tiles;
  } else if (one_tile && tile.predicted_bytes > kStreamMemoryAdvantage * strip.predicted_bytes) {
    m.stream = true;
    m.why = times_of + "; the whole image as one tile would hold " + format_bytes(tile.predicted_bytes) +
            ", the stream " + format_bytes(strip.predicted_bytes);
  } else {
    m.why = (one_tile ? "the whole image is one tile, " : tiles + " ") + "predicted " + times(m.tile_time) +
            " one pass's time, the stream " + times(m.stream_time);
  }
  return m;
}

}  // namespace tessera

