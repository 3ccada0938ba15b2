// Each command's flags set the field their key names, and only it (tests/lib/flag_fields.hpp):
// one test per options struct a command binds with add_field_flags.
#include <gtest/gtest.h>

#include "flag_fields.hpp"
#include "tessera/engine/infer_options.hpp"

namespace tessera {
namespace {

TEST(InferOptions, EveryFlagSetsItsField) { EXPECT_EQ(test::every_flag_sets_its_field<engine::InferOptions>(), ""); }

}  // namespace
}  // namespace tessera
