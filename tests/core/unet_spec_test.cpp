#include "tessera/core/unet_spec.hpp"

#include <gtest/gtest.h>

#include <string>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

// DESIGN.md's closed form, checked against the layer walk the library does.
int64_t closed_form_halo(const UNetOptions& o) {
  return ((3ll << (o.levels - 2)) - 1) * (o.kernel - 1) * o.convs_per_level;
}

TEST(UNetSpec, PresetHalosMatchTheDesignTable) {
  EXPECT_EQ(unet_halo(unet_preset("unet-small")), 92);
  EXPECT_EQ(unet_halo(unet_preset("unet-medium1")), 230);
  EXPECT_EQ(unet_halo(unet_preset("unet-medium2")), 188);
  EXPECT_EQ(unet_halo(unet_preset("unet-large")), 380);
}

TEST(UNetSpec, HaloFromLayerWalkEqualsClosedFormIn2dAnd3d) {
  for (int dims : {2, 3})
    for (int levels = 2; levels <= 7; ++levels)
      for (int nc = 1; nc <= 5; ++nc) {
        const auto o = UNetOptions{}.with_dims(dims).with_levels(levels).with_convs_per_level(nc);
        EXPECT_EQ(unet_halo(o), closed_form_halo(o)) << "L=" << levels << " n_c=" << nc;
      }
  EXPECT_EQ(unet_halo(unet_preset("unet3d-32")), 92);
  EXPECT_EQ(unet_halo(unet_preset("unet3d-tiny")), 20);
}

TEST(UNetSpec, ClassicUNetMaps572To388) {
  const auto o = unet_preset("unet-small");
  EXPECT_EQ(unet_output_size(o, 572), 388);
  EXPECT_EQ(unet_remainder(o), 4);
  EXPECT_EQ(unet_alignment(o), 16);
  EXPECT_FALSE(unet_output_size(o, 573).has_value());
  // Every S multiple of the alignment gives a valid S + r output from S + r + 2ε input.
  for (int64_t s = 16; s <= 512; s += 16) EXPECT_EQ(unet_output_size(o, s + 4 + 184), s + 4);
}

TEST(UNetSpec, SamePaddingKeepsSizes) {
  const auto o = unet_preset("unet-tiny").with_padding(Padding::kSame);
  EXPECT_EQ(unet_output_size(o, 256), 256);
  EXPECT_EQ(unet_remainder(o), 0);
  // The reach of a tile edge's zero padding: 46 (the valid halo 44 and 2 the pooling rounds up),
  // rounded up to a half alignment; TiledInference.SamePaddingTilesEqualOneWholeImagePass2d
  // shows 44 leaves tiled probabilities 6·10⁻³ off the whole pass.
  EXPECT_EQ(unet_halo(o), 48);
}

// `same` padding: the tiler reads S + 2·halo for an aligned inset S, which must itself be an
// input the network takes (a multiple of the alignment) — unet-small's reach 94 is not (188 is
// 12 mod 16), so its halo is rounded up to 96; never below the reach the crop needs.
TEST(UNetSpec, SamePaddingHaloKeepsEveryAlignedTileAValidInput) {
  for (const std::string& name : unet_preset_names()) {
    const UNetOptions valid = unet_preset(name);
    const UNetOptions same = UNetOptions(valid).with_padding(Padding::kSame);
    const int64_t a = unet_alignment(same), h = unet_halo(same);
    EXPECT_GE(h, unet_halo(valid)) << name;
    EXPECT_LT(h, unet_halo(valid) + a) << name;
    for (int64_t s = a; s <= 8 * a; s += a) EXPECT_EQ(unet_output_size(same, s + 2 * h), s + 2 * h) << name << " S " << s;
  }
}

TEST(UNetSpec, ValidateNamesTheBadField) {
  try {
    UNetOptions{}.with_classes(1).validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("classes"), std::string::npos);
  }
  EXPECT_NO_THROW(UNetOptions{}.validate());  // the defaults are valid
  for (const auto& name : unet_preset_names()) EXPECT_NO_THROW(unet_preset(name).validate()) << name;
  EXPECT_THROW(unet_preset("unet-huge"), Error);
}

TEST(UNetSpec, FlopsPerPixelOfOneLevelNetworkIsHandCountable) {
  // One level, two 3×3 convs 4→8→8, head 8→3: 2·9·(4·8 + 8·8) + 2·8·3 = 1776.
  const auto o = UNetOptions{}.with_levels(1).with_in_channels(4).with_base_filters(8).with_classes(3);
  EXPECT_DOUBLE_EQ(unet_flops_per_output_pixel(o), 1776.0);
  EXPECT_EQ(unet_parameter_count(o), (9 * 4 * 8 + 8) + (9 * 8 * 8 + 8) + (8 * 3 + 3));
}

}  // namespace
}  // namespace tessera
