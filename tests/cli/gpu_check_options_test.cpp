// tessera-gpu-check's options (cli/gpu_check/gpu_check_options.hpp): the defaults are valid,
// every flag sets its field, and validate() names the flag of a bad value.
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "flag_fields.hpp"
#include "gpu_check_options.hpp"

namespace tessera {
namespace {

using gpu_check::GpuCheckOptions;
using test::error_of;

TEST(GpuCheckOptions, DefaultsAreValid) { EXPECT_NO_THROW(GpuCheckOptions().validate()); }

TEST(GpuCheckOptions, EveryFlagSetsItsField) {
  const std::map<std::string, std::string> enums{{"padding", "same"}, {"norm", "batch"}, {"decoder", "upsample"}};
  EXPECT_EQ(test::every_flag_sets_its_field<GpuCheckOptions>(enums), "");
}

TEST(GpuCheckOptions, RefusalsNameTheFlag) {
  const std::pair<std::function<void(GpuCheckOptions&)>, std::string> cases[] = {
      {[](GpuCheckOptions& o) { o.device = "tpu"; }, "--device"},
      {[](GpuCheckOptions& o) { o.tile = 500; }, "--tile"},  // not a multiple of 16 (5 levels)
      {[](GpuCheckOptions& o) { o.scene = 256; }, "--scene"},
      {[](GpuCheckOptions& o) { o.precisions = "fp16"; }, "--precisions"},
      {[](GpuCheckOptions& o) { o.overlap = 1; }, "--overlap"},
      {[](GpuCheckOptions& o) { o.model.padding = Padding::kSame; }, "--padding"},
      {[](GpuCheckOptions& o) { o.reference = "/no/such/script.py"; }, "--reference"},
      {[](GpuCheckOptions& o) { o.train_steps = 0; }, "--train-steps"},
  };
  for (const auto& [change, flag] : cases) {
    GpuCheckOptions o;
    change(o);
    const std::string e = error_of([&] { o.validate(); });
    EXPECT_NE(e.find(flag), std::string::npos) << flag << ": " << e;
  }
  GpuCheckOptions no_reference;
  no_reference.python = "";
  no_reference.reference = "/no/such/script.py";
  EXPECT_NO_THROW(no_reference.validate()) << "without a python the reference is not needed";
}

}  // namespace
}  // namespace tessera
