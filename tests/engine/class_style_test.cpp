// Class names and colours set once (data.classes) and background a stated choice
// (data.background): read and checked with the file's line, resolved to one colour per class,
// carried by the checkpoint's JSON (older checkpoints read as before), and what a class named
// "water" gets by default.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/colors.hpp"
#include "tessera/engine/config_file.hpp"
#include "tessera/engine/run_config.hpp"
#include "error_of.hpp"

namespace tessera::engine {
namespace {

const std::string kPairs = "data:\n  pairs: [{image: a.tif, labels: b.tif}]\n";

RunConfig parse(const std::string& text) { return read_run_config(ConfigFile::parse(text, "run.yaml")); }

std::string error_of(const std::string& text) {
  return test::error_of([&] { parse(text); });
}

TEST(DataClasses, NameAndColourEveryClassOnce) {
  const RunConfig c = parse(kPairs +
                            "  classes: [{name: water, color: \"#1f78b4\"}, {name: land}]\n"
                            "  background: none\n");
  EXPECT_EQ(c.data.class_names, (std::vector<std::string>{"water", "land"}));
  EXPECT_EQ(c.data.background, "none");
  const std::vector<Rgb> colors = resolve_class_colors(c.data, c.data.class_names, 2, "run.yaml");
  EXPECT_EQ(colors[0], (Rgb{0x1f, 0x78, 0xb4}));
  EXPECT_EQ(colors[1], default_class_color("land", 1));  // not given: the default for its name / id
  // The resolved config.yaml reads back to the same classes.
  const RunConfig again = read_run_config(ConfigFile::parse(resolved_config_yaml(c), "config.yaml"));
  EXPECT_EQ(again.data.class_names, c.data.class_names);
  EXPECT_EQ(resolve_class_colors(again.data, again.data.class_names, 2, "config.yaml"), colors);
}

TEST(DataClasses, BadColourCountAndBackgroundNameTheKey) {
  EXPECT_EQ(error_of(kPairs + "  classes: [{name: water, color: \"#12345\"}]\n"),
            "run.yaml:3: data.classes[0].color '#12345': expected \"#rrggbb\", e.g. color: \"#1f78b4\" (quoted)");
  EXPECT_EQ(error_of(kPairs + "  classes: [{color: \"#123456\"}]\n"),
            "run.yaml:3: data.classes[0].name: required (what class 0 is)");
  EXPECT_NE(error_of(kPairs + "  background: 1\n").find("data.background '1': expected 0"), std::string::npos);
  EXPECT_NE(error_of(kPairs + "  class_names: [a, b]\n  classes: [{name: a}, {name: c}]\n").find("give data.classes only"),
            std::string::npos);
  const RunConfig c = parse(kPairs + "  classes: [{name: water}, {name: land}]\n");
  try {
    resolve_class_colors(c.data, c.data.class_names, 3, "run.yaml");
    ADD_FAILURE() << "three classes accepted with two named";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.classes lists 2 classes but model.classes is 3"), std::string::npos)
        << e.what();
  }
}

TEST(DataClasses, WaterIsBlueByDefaultAndClassZeroIsNotGreen) {
  const Rgb water = default_class_color("open water", 0);
  EXPECT_GT(water[2], water[1]);  // blue over green
  const Rgb zero = label_color(0);
  EXPECT_FALSE(zero[1] > zero[0] && zero[1] > zero[2]) << "class 0 by number is green";
  EXPECT_EQ(parse_hex_color(hex_color(Rgb{1, 2, 255})), (Rgb{1, 2, 255}));
  EXPECT_FALSE(parse_hex_color("1f78b4"));
}

TEST(CheckpointMeta, CarriesColoursBackgroundAndTrainingInputs) {
  CheckpointMeta m;
  m.model = unet_preset("unet-tiny");
  m.class_names = {"water", "land"};
  m.class_colors = {{31, 120, 180}, {51, 160, 44}};
  m.background = "none";
  m.inputs = {"CT", {-1000}, {1200}, {2.5, 0.7, 0.7}, "mm"};
  nlohmann::json j = m;
  const CheckpointMeta back = j.get<CheckpointMeta>();
  EXPECT_EQ(back.class_colors, m.class_colors);
  EXPECT_EQ(back.background, "none");
  EXPECT_EQ(back.inputs, m.inputs);
  // A checkpoint written before them: the default palette, class 0 background, inputs unknown.
  j.erase("class_colors");
  j.erase("background");
  j.erase("inputs");
  const CheckpointMeta old = j.get<CheckpointMeta>();
  EXPECT_TRUE(old.class_colors.empty());
  EXPECT_EQ(old.background, "0");
  EXPECT_EQ(old.inputs, TrainingInputs{});
}

}  // namespace
}  // namespace tessera::engine
