#pragma once
// Class colours, shared by every output (GeoTIFF colour tables, .qml styles, overlay PNGs,
// DICOM SEG, label sidecars) and the viewer. A run sets them once (`data.classes: [{name,
// color}]`, stored in the checkpoint); where it does not, a class gets a conventional colour
// for a well-known name (water blue, vegetation green, ...) and otherwise the default palette
// by id (Paul Tol's colour-blind-safe "bright" scheme, then a hash). kNoDataLabel is
// transparent black. Torch-free.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

using Rgb = std::array<uint8_t, 3>;

/// The default palette: a distinct colour per label id (a fixed table for the first ids,
/// then a hash). Says nothing about what a class is: id 0 is not green.
Rgb label_color(int label);

/// "#rrggbb" (either case) as a colour; nullopt for any other text.
std::optional<Rgb> parse_hex_color(const std::string& text);

/// "#rrggbb", lower case.
std::string hex_color(const Rgb& c);

/// The colour a class named `name` gets when none is given: a conventional one for common
/// land-cover and anatomy names ("water" blue, "vegetation" green, "building" red, "liver"
/// brown, ...; whole words, any case), else label_color(id).
Rgb default_class_color(const std::string& name, int id);

/// The colour of class `id`: colors[id] when given, else label_color(id).
Rgb class_color(const std::vector<Rgb>& colors, int id);

}  // namespace tessera

namespace tessera {

/// One line naming every class with its id and colour and what class 0 is, for the summaries
/// of train, infer and model-info: "classes: 0 water #1f78b4, 1 land #33a02c; background: none
/// (class 0 is a class like the others)". `background`: "0" or "none".
std::string describe_classes(const std::vector<std::string>& names, const std::vector<Rgb>& colors,
                             const std::string& background);

}  // namespace tessera
