// Streamed inference (stream_executor.hpp, for_each_strip) against one forward pass of the
// same network over the whole padded input: logits within 1e-5 of the largest, labels equal,
// FLOPs those of that one pass, carried memory independent of the image's height.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "memory_image.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/core/inference.hpp"
#include "tessera/core/stream_executor.hpp"
#include "tessera/core/tensor_io.hpp"
#include "tessera/core/tile_choice.hpp"

namespace tessera {
namespace {

using testing::MemoryImage;
using testing::MemorySink;

constexpr double kRelative = 1e-5;

float pattern(int c, const Index& at) {
  float v = 0.2f * float(c);
  for (size_t a = 0; a < at.size(); ++a) v += std::cos(0.17f * float(at[a]) * float(a + 1) + float(c));
  return v;
}

// The whole input pushed in strips of `rows`, cycling through `heights` when given.
torch::Tensor streamed(UNet& net, const torch::Tensor& input, const std::vector<int64_t>& heights, double* flops,
                       int64_t* peak = nullptr) {
  StreamExecutor executor(net);
  std::vector<torch::Tensor> out;
  for (int64_t at = 0, k = 0; at < input.size(2); ++k) {
    const int64_t rows = std::min(heights[size_t(k) % heights.size()], input.size(2) - at);
    torch::Tensor y = executor.push(input.narrow(2, at, rows));
    if (y.defined()) out.push_back(y);
    at += rows;
  }
  *flops = executor.flops();
  if (peak) *peak = executor.peak_held_bytes();
  EXPECT_EQ(executor.rows_in(), input.size(2));
  return torch::cat(out, 2);
}

double relative_error(const torch::Tensor& got, const torch::Tensor& want) {
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

// A preset's shape (levels, convolutions, kernel) with few filters, on the smallest input
// that covers an odd-sized image, pushed in strips of 1 row, the alignment, and uneven heights.
void expect_stream_equals_whole_forward(UNetOptions o, const Index& extent, int seed) {
  torch::manual_seed(seed);
  UNet net(o);
  net->eval();
  torch::NoGradGuard no_grad;
  const Index whole = unet_whole_input(o, extent);
  std::vector<int64_t> shape{1, o.in_channels};
  shape.insert(shape.end(), whole.begin(), whole.end());
  const torch::Tensor input = torch::randn(shape);
  const torch::Tensor reference = net->forward(input);
  const int64_t a = unet_alignment(o);
  for (const std::vector<int64_t>& heights : std::vector<std::vector<int64_t>>{{1}, {a}, {3, 2 * a + 1, 5}}) {
    double flops = 0;
    int64_t peak = 0;
    const torch::Tensor got = streamed(net, input, heights, &flops, &peak);
    ASSERT_EQ(got.sizes(), reference.sizes()) << "strip " << heights[0];
    const double error = relative_error(got, reference);
    EXPECT_LE(error, kRelative) << "strip " << heights[0];
    EXPECT_TRUE(got.argmax(1).equal(reference.argmax(1))) << "strip " << heights[0];
    // Every feature once: the FLOPs of one pass, counted independently from the layer sizes.
    EXPECT_NEAR(flops / box_layer_sequence(o, whole).flops(), 1.0, 1e-9) << "strip " << heights[0];
    if (heights.size() == 1) EXPECT_EQ(stream_footprint(o, whole, heights[0]).carried, peak) << "strip " << heights[0];
  }
}

TEST(StreamExecutor, EqualsOneForwardPassForEveryBuiltIn2dPreset) {
  for (const std::string& name : unet_preset_names()) {
    UNetOptions o = unet_preset(name);
    if (o.dims != 2) continue;
    o.with_base_filters(name == "unet-large" ? 2 : 4).with_classes(3);
    SCOPED_TRACE(name);
    expect_stream_equals_whole_forward(o, {13, 7}, 11);
  }
}

TEST(StreamExecutor, EqualsOneForwardPassWithBatchNormAndTheUpsamplingDecoder) {
  const UNetOptions base = unet_preset("unet-tiny").with_base_filters(4);
  expect_stream_equals_whole_forward(UNetOptions(base).with_norm(Norm::kBatch), {21, 9}, 12);
  expect_stream_equals_whole_forward(UNetOptions(base).with_decoder(Decoder::kUpsample), {21, 9}, 13);
  expect_stream_equals_whole_forward(UNetOptions(base).with_convs_per_level(3).with_kernel(5), {5, 11}, 14);
}

TEST(StreamExecutor, EqualsOneForwardPassFor3dSlabs) {
  expect_stream_equals_whole_forward(unet_preset("unet3d-tiny").with_base_filters(4), {9, 5, 7}, 15);
  expect_stream_equals_whole_forward(unet_preset("unet3d-32").with_base_filters(1), {3, 3, 1}, 16);
}

TEST(StreamExecutor, CarriedMemoryDoesNotGrowWithTheImageHeight) {
  torch::manual_seed(17);
  const UNetOptions o = unet_preset("unet-tiny").with_base_filters(4);
  UNet net(o);
  net->eval();
  torch::NoGradGuard no_grad;
  const int64_t width = unet_whole_input(o, {1, 40})[1];
  int64_t peaks[2] = {0, 0};
  const int64_t heights[2] = {unet_whole_input(o, {64, 1})[0], unet_whole_input(o, {512, 1})[0]};
  for (int k = 0; k < 2; ++k) {
    double flops = 0;
    streamed(net, torch::randn({1, o.in_channels, heights[k], width}), {unet_alignment(o)}, &flops, &peaks[k]);
  }
  EXPECT_GT(peaks[0], 0);
  EXPECT_EQ(peaks[0], peaks[1]) << "carried rows must not depend on the rows still to come";
  // The memory model's dry run of the executor predicts the carried bytes exactly.
  EXPECT_EQ(stream_footprint(o, {heights[1], width}, unet_alignment(o)).carried, peaks[1]);
  const int64_t input_bytes = 4 * o.in_channels * heights[1] * width;
  EXPECT_LT(peaks[1], input_bytes) << "a streamed image holds less than its own input";
}

TEST(StreamExecutor, RefusesWhatDoesNotStream) {
  const UNetOptions tiny = unet_preset("unet-tiny").with_base_filters(4);
  EXPECT_FALSE(stream_refusal(tiny).has_value());
  EXPECT_FALSE(stream_refusal(UNetOptions(tiny).with_norm(Norm::kBatch)).has_value());
  EXPECT_NE(stream_refusal(UNetOptions(tiny).with_padding(Padding::kSame)).value_or("").find("same"), std::string::npos);
  EXPECT_NE(stream_refusal(UNetOptions(tiny).with_norm(Norm::kGroup)).value_or("").find("statistics"),
            std::string::npos);
  UNet same(UNetOptions(tiny).with_padding(Padding::kSame));
  EXPECT_THROW(StreamExecutor{same}, Error);
}

// for_each_strip over an image from a source: odd sizes, nodata, 1 and 2 threads.
TEST(StreamedInference, LogitsAndLabelsEqualTheWholeImageForwardAndTheTiles) {
  torch::manual_seed(18);
  const UNetOptions o = unet_preset("unet-tiny").with_base_filters(8).with_classes(3);
  UNet net(o);
  const Index extent{61, 37};
  MemoryImage image(extent, 4, [](int c, const Index& at) {
    return at[0] == 5 && at[1] < 4 && c == 1 ? std::numeric_limits<float>::quiet_NaN() : pattern(c, at);
  });
  const auto norm = identity_normalization(4);
  // The reference: the network once over the whole window the stream reads, from −ε.
  const Index whole = unet_whole_input(o, extent);
  const int64_t halo = unet_halo(o);
  torch::Tensor reference;
  {
    net->eval();
    torch::NoGradGuard no_grad;
    const Window w = read_window(image, Box{Index(2, -halo), whole}, norm);
    reference = net->forward(w.values.unsqueeze(0))[0].narrow(1, 0, extent[0]).narrow(2, 0, extent[1]);
    net->use_contiguous();
  }
  MemorySink tiled(extent);
  infer_labels(net, image, norm, tiled, InferenceOptions().with_tile(16).with_progress(false));
  for (int threads : {1, 2}) {
    torch::set_num_threads(threads);
    for (int64_t strip : {8, 29, 200}) {
      for (int64_t columns : {1, 2, 3}) {
        SCOPED_TRACE("threads " + std::to_string(threads) + ", strip " + std::to_string(strip) + ", columns " +
                     std::to_string(columns));
        const auto options = InferenceOptions().with_strip(strip).with_columns(columns).with_progress(false);
        const torch::Tensor logits = infer_logits(net, image, norm, options);
        ASSERT_FALSE(torch::isnan(logits).any().item<bool>()) << "a row was never written";
        EXPECT_LE(relative_error(logits, reference), kRelative);
        EXPECT_LE((torch::softmax(logits, 0) - torch::softmax(reference, 0)).abs().max().item<double>(), kRelative);
        MemorySink sink(extent);
        const InferenceReport r = infer_labels(net, image, norm, sink, options);
        for (int w : sink.writes) ASSERT_EQ(w, 1);
        EXPECT_EQ(sink.labels, tiled.labels);
        EXPECT_EQ(sink.labels[5 * 37 + 2], kNoDataLabel);
        EXPECT_LE(r.recompute, column_recompute(o, extent, columns) + 1e-9);  // a hair under: the pass stops early
        EXPECT_GT(r.recompute, 0.9 * column_recompute(o, extent, columns));
        EXPECT_EQ(r.held_bytes, columns_footprint(o, extent, strip, columns).carried);
        EXPECT_EQ(torch::get_num_threads(), threads);  // the pieces' share restored
      }
    }
  }
  torch::set_num_threads(1);
}

// Column groups streamed one after another (work items of their own, on the label rasters'
// 256-column grid), each in its column pieces: one pass over the whole image, the tiles'
// labels, every pixel written once, the FLOPs of every group's pieces.
TEST(StreamedInference, ColumnGroupsOneAfterAnotherEqualTheWholeImage) {
  torch::manual_seed(21);
  const UNetOptions o = unet_preset("unet-tiny").with_base_filters(4).with_classes(3);
  UNet net(o);
  const Index extent{29, 2 * kStreamGroupGrid + 37};
  MemoryImage image(extent, 4, pattern);
  const auto norm = identity_normalization(4);
  const torch::Tensor whole = infer_logits(net, image, norm, InferenceOptions().with_strip(16).with_progress(false));
  MemorySink tiled(extent);
  infer_labels(net, image, norm, tiled, InferenceOptions().with_tile(64).with_progress(false));
  for (int64_t groups : {2, 3}) {
    for (int64_t columns : {1, 2}) {
      SCOPED_TRACE("groups " + std::to_string(groups) + ", columns " + std::to_string(columns));
      const auto options =
          InferenceOptions().with_strip(16).with_groups(groups).with_columns(columns).with_progress(false);
      const std::vector<Box> items = work_insets(o, extent, options);
      ASSERT_EQ(items.size(), size_t(groups));
      for (const Box& b : items) EXPECT_EQ(b.origin[1] % kStreamGroupGrid, 0);
      const torch::Tensor got = infer_logits(net, image, norm, options);
      ASSERT_FALSE(torch::isnan(got).any().item<bool>()) << "a column was never written";
      EXPECT_LE(relative_error(got, whole), kRelative);
      MemorySink sink(extent);
      const InferenceReport r = infer_labels(net, image, norm, sink, options);
      for (int w : sink.writes) ASSERT_EQ(w, 1);
      EXPECT_EQ(sink.labels, tiled.labels);
      EXPECT_LE(r.recompute, groups_recompute(o, extent, groups, columns) + 1e-9);
      EXPECT_GT(r.recompute, 0.9 * groups_recompute(o, extent, groups, columns));
    }
  }
}

// Sample-parallel ranks take bands of rows and stream each from ε rows above it: taken in
// any order (as ranks take them), their rows equal one pass over the whole image.
void expect_bands_equal_the_whole_image(const UNetOptions& o, const Index& extent, int64_t band, int64_t strip,
                                        int64_t columns = 1) {
  torch::manual_seed(20);
  UNet net(o);
  MemoryImage image(extent, o.in_channels, pattern);
  const auto norm = identity_normalization(o.in_channels);
  const torch::Tensor whole = infer_logits(net, image, norm, InferenceOptions().with_strip(strip).with_progress(false));
  const auto options = InferenceOptions().with_strip(strip).with_band(band).with_columns(columns).with_progress(false);
  const std::vector<Box> bands = work_insets(o, extent, options);
  ASSERT_GE(bands.size(), 3u);
  std::vector<int64_t> order;  // the last band first, then every other one
  order.push_back(int64_t(bands.size()) - 1);
  for (int64_t i = 0; i + 1 < int64_t(bands.size()); i += 2) order.push_back(i);
  for (int64_t i = 1; i + 1 < int64_t(bands.size()); i += 2) order.push_back(i);
  size_t next = 0;
  torch::Tensor got = torch::full_like(whole, std::numeric_limits<float>::quiet_NaN());
  std::vector<int64_t> rows(bands.size(), 0);
  const InferenceReport r = for_each_tile(
      net, image, norm, options,
      [&](const Tile& t, const torch::Tensor& logits, const torch::Tensor&) {
        ASSERT_TRUE(bands[size_t(t.index)].contains(t.inset));
        rows[size_t(t.index)] += t.inset.size[0];
        got.narrow(1, t.inset.origin[0], t.inset.size[0]).copy_(logits);
      },
      [&] { return next < order.size() ? order[next++] : int64_t{-1}; });
  for (size_t i = 0; i < bands.size(); ++i) EXPECT_EQ(rows[i], bands[i].size[0]) << "band " << i;
  ASSERT_FALSE(torch::isnan(got).any().item<bool>()) << "a row was never written";
  EXPECT_LE(relative_error(got, whole), kRelative);
  EXPECT_LE((torch::softmax(got, 0) - torch::softmax(whole, 0)).abs().max().item<double>(), kRelative);
  EXPECT_TRUE(got.argmax(0).equal(whole.argmax(0)));
  // Each band re-reads and recomputes its halo once: more than one pass, at most the bound.
  EXPECT_GT(r.recompute, 1.0);
  if (columns == 1) EXPECT_LE(r.recompute, band_recompute(o, extent, band) + 1e-9);
}

TEST(StreamedInference, BandsTakenInAnyOrderEqualTheWholeImage) {
  const UNetOptions tiny = unet_preset("unet-tiny").with_base_filters(4).with_classes(3);
  const int64_t a = unet_alignment(tiny);
  expect_bands_equal_the_whole_image(tiny, {8 * a + 3, 29}, 2 * a, 16);  // odd, the last band short
  expect_bands_equal_the_whole_image(UNetOptions(tiny).with_norm(Norm::kBatch), {5 * a, 19}, a, 5);
  const UNetOptions vol = unet_preset("unet3d-tiny").with_base_filters(2).with_in_channels(1).with_classes(2);
  expect_bands_equal_the_whole_image(vol, {4 * unet_alignment(vol) + 1, 9, 7}, unet_alignment(vol), 3);
  // Column pieces side by side within each band (2-D columns; in 3-D the rows of each slice).
  expect_bands_equal_the_whole_image(tiny, {8 * a + 3, 29}, 2 * a, 16, 2);
  expect_bands_equal_the_whole_image(vol, {4 * unet_alignment(vol) + 1, 19, 7}, unet_alignment(vol), 3, 3);
}

TEST(StreamedInference, BandRowsSplitTheImageOnThePoolingGrid) {
  const UNetOptions o = unet_preset("unet-tiny");
  const int64_t a = unet_alignment(o);
  EXPECT_EQ(band_rows(o, {333, 200}, 1), 0);
  for (int ranks : {2, 3, 5}) {
    const int64_t band = band_rows(o, {333, 200}, ranks);
    EXPECT_EQ(band % a, 0);
    EXPECT_GE(band * ranks, 333);
    EXPECT_LT((band - a) * ranks, 333) << "the smallest aligned band that leaves no rank more than one";
    EXPECT_LE(work_insets(o, {333, 200}, InferenceOptions().with_strip(a).with_band(band)).size(), size_t(ranks));
  }
  EXPECT_THROW(InferenceOptions().with_strip(a).with_band(a + 1).validate(o), Error);
  EXPECT_THROW(InferenceOptions().with_strip(a).with_columns(0).validate(o), Error);
  EXPECT_NO_THROW(InferenceOptions().with_strip(a).with_columns(3).validate(o));
}

TEST(StreamedInference, TilesRecomputeWhatAStreamComputesOnce) {
  torch::manual_seed(19);
  UNet net(unet_preset("unet-tiny").with_base_filters(4));
  MemoryImage image({100, 90}, 4, pattern);
  MemorySink a({100, 90}), b({100, 90});
  const auto norm = identity_normalization(4);
  const InferenceReport tiles = infer_labels(net, image, norm, a, InferenceOptions().with_tile(16).with_progress(false));
  const InferenceReport stream = infer_labels(net, image, norm, b, InferenceOptions().with_strip(24).with_progress(false));
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_GT(tiles.recompute, 2.0);  // 16 + 4 + 2·44 input rows for 16 kept, per axis
  EXPECT_LE(stream.recompute, 1.0 + 1e-9);
  std::printf("recompute: tiles of 16 %.2fx, stream %.3fx\n", tiles.recompute, stream.recompute);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(StripChoice, ShortestStripPredictedNearOnePassWithinTheBudget) {
  // 512 wide on 8 threads: one column piece (more would recompute more than allowed), so
  // the strip's rows set its time on every thread.
  const UNetOptions o = unet_preset("unet-tiny");
  const Index extent{4096, 512};
  ASSERT_EQ(stream_columns(o, extent, 8), 1);
  const int64_t alignment = unet_alignment(o);
  const Index whole = unet_whole_input(o, extent);
  const auto time = [&](int64_t strip, int threads = 8) { return stream_time_factor(o, whole, strip, threads); };
  const StripChoice roomy = choose_strip(o, extent, int64_t{64} << 30, 0, 8);
  EXPECT_EQ(roomy.columns, 1);
  EXPECT_EQ(roomy.strip % alignment, 0);
  EXPECT_DOUBLE_EQ(roomy.predicted_time, time(roomy.strip));
  EXPECT_LE(roomy.predicted_time, kStreamTimeTarget);
  EXPECT_GT(time(roomy.strip - alignment), kStreamTimeTarget);  // the time, not the pixels, sets it
  EXPECT_GT(roomy.strip * whole[1], kStreamStripPixels);
  // A narrow image: strips as tall as kStreamStripPixels allows, though shorter ones would do.
  const StripChoice narrow = choose_strip(o, {4096, 256}, int64_t{64} << 30, 0, 1);
  const int64_t narrow_across = unet_whole_input(o, {4096, 256})[1];
  EXPECT_LE(narrow.strip * narrow_across, kStreamStripPixels);
  EXPECT_GT((narrow.strip + alignment) * narrow_across, kStreamStripPixels);
  EXPECT_LE(roomy.predicted_bytes, roomy.budget_bytes);
  // Shorter strips run slower, taller ones faster, never faster than one pass; a 3-D slab's
  // slices are rows enough: one slab of the alignment is near one pass.
  const UNetOptions v = unet_preset("unet3d-32");
  const Index cube = unet_whole_input(v, {256, 256, 256});
  EXPECT_LT(stream_time_factor(v, cube, unet_alignment(v), 2), kStreamTimeTarget);
  EXPECT_EQ(choose_strip(v, {256, 256, 256}, int64_t{64} << 30, 0, 2).strip, unet_alignment(v));
  EXPECT_EQ(choose_strip(v, {256, 256, 256}, int64_t{64} << 30, 0, 2).columns, 1);  // ε = 92: pieces recompute 1.4x
  EXPECT_GT(time(alignment), time(2 * alignment));
  EXPECT_GT(time(alignment, 2), time(alignment, 1));  // more threads idle on a thin slab
  EXPECT_LT(choose_strip(o, extent, int64_t{64} << 30, 0, 2).strip, roomy.strip);
  EXPECT_GT(time(4 * roomy.strip), 1.0);
  EXPECT_LT(time(4 * roomy.strip), roomy.predicted_time);
  // A budget below the roomy prediction: a shorter strip, predicted within it, saying so.
  const StripChoice tight = choose_strip(o, extent, roomy.predicted_bytes - 1, 0, 8);
  EXPECT_LT(tight.strip, roomy.strip);
  EXPECT_LE(tight.predicted_bytes, tight.budget_bytes);
  EXPECT_NE(tight.reason.find("do not fit"), std::string::npos) << tight.reason;
  EXPECT_NE(tight.summary().find("strips of " + std::to_string(tight.strip) + " rows"), std::string::npos);
  // Nothing fits: the alignment, saying so.
  const StripChoice none = choose_strip(o, extent, 1, 0, 8);
  EXPECT_EQ(none.strip, alignment);
  EXPECT_NE(none.reason.find("exceeds"), std::string::npos) << none.reason;
  // Carried rows grow with the width, not the height.
  const Index square{4096, 4096}, tall{16384, 4096};
  EXPECT_EQ(stream_footprint(o, unet_whole_input(o, tall), 24).carried,
            stream_footprint(o, unet_whole_input(o, square), 24).carried);
  EXPECT_GT(stream_footprint(o, unet_whole_input(o, {4096, 8192}), 24).carried,
            stream_footprint(o, unet_whole_input(o, square), 24).carried);
}

// Widths that cover `across`, at most `count` of them, each but the last on `grid`.
void expect_widths_on_grid(const std::vector<int64_t>& widths, int64_t across, int64_t count, int64_t grid) {
  SCOPED_TRACE("count " + std::to_string(count));
  int64_t sum = 0;
  for (size_t k = 0; k < widths.size(); ++k) {
    sum += widths[k];
    if (k + 1 < widths.size()) EXPECT_EQ(widths[k] % grid, 0) << "part " << k;
  }
  EXPECT_EQ(sum, across);
  EXPECT_LE(int64_t(widths.size()), count);
}

// Two threads on a wide image: two column pieces side by side, one thread each, their time
// what one thread's strips take times what their shared columns recompute.
TEST(StripChoice, ColumnPiecesSideBySideWhereTheyRecomputeLittle) {
  const UNetOptions o = unet_preset("unet-tiny");
  const int64_t alignment = unet_alignment(o);
  const Index extent{4096, 4096};
  for (int64_t count : {1, 2, 3, 5}) expect_widths_on_grid(column_widths(o, {100, 333}, count), 333, count, alignment);
  EXPECT_DOUBLE_EQ(column_recompute(o, extent, 1), 1.0);
  EXPECT_LT(column_recompute(o, extent, 2), kStreamColumnRecompute);
  EXPECT_GT(column_recompute(o, extent, 2), 1.0);
  EXPECT_GT(column_recompute(o, {4096, 512}, 2), kStreamColumnRecompute);
  EXPECT_EQ(stream_columns(o, extent, 1), 1);
  EXPECT_EQ(stream_columns(o, {4096, 512}, 2), 1);
  for (int64_t width : {512, 1024, 2048, 4096, 8192})
    std::printf("unet-tiny, %lld wide: 2 column pieces recompute %.4fx, 4 pieces %.4fx\n", (long long)width,
                column_recompute(o, {4096, width}, 2), column_recompute(o, {4096, width}, 4));
  ASSERT_EQ(stream_columns(o, extent, 2), 2);
  const StripChoice two = choose_strip(o, extent, int64_t{64} << 30, 0, 2);
  EXPECT_EQ(two.columns, 2);
  EXPECT_EQ(two.groups, stream_groups(o, extent, 2));
  const Index group{4096, group_widths(o, extent, two.groups).front()};
  const Index group_piece = unet_whole_input(o, {4096, column_widths(o, group, 2).front()});
  EXPECT_DOUBLE_EQ(two.predicted_time, groups_recompute(o, extent, two.groups, 2) *
                                           stream_time_factor(o, group_piece, two.strip, 1));
  const Index piece = unet_whole_input(o, {4096, column_widths(o, extent, 2).front()});
  EXPECT_NE(two.summary().find("2 column pieces"), std::string::npos) << two.summary();
  // The pieces' footprint: their parts summed, the weights once.
  const StreamFootprint both = columns_footprint(o, extent, two.strip, 2);
  const StreamFootprint half = stream_footprint(o, piece, two.strip);
  EXPECT_GT(both.carried, half.carried);
  EXPECT_LT(both.bytes, 2 * half.bytes);  // the weights once
  EXPECT_EQ(columns_footprint(o, extent, two.strip, 1).carried,
            stream_footprint(o, unet_whole_input(o, extent), two.strip).carried);
  // One formula: one piece's bytes are the stream's own, two pieces' the same formula of the
  // summed tensors (not a piece's bytes rescaled by another factor).
  EXPECT_EQ(columns_footprint(o, extent, two.strip, 1).bytes,
            stream_footprint(o, unet_whole_input(o, extent), two.strip).bytes);
  const StreamFootprint other = stream_footprint(o, unet_whole_input(o, {4096, column_widths(o, extent, 2).back()}), two.strip);
  EXPECT_EQ(both.tensors(), half.tensors() + other.tensors());
  EXPECT_EQ(both.bytes, stream_resident_bytes(o, both.tensors()));
  EXPECT_EQ(half.bytes + other.bytes - both.bytes, stream_resident_bytes(o, 0));  // the weights, counted once
}

TEST(ModeChoice, AutoStreamsWhereItsPredictedTimeBeatsTheTiles) {
  const UNetOptions o = unet_preset("unet-tiny");
  const Index extent{4096, 4096};
  const StripChoice strip = choose_strip(o, extent, int64_t{64} << 30, 0, 2);
  const int64_t alignment = unet_alignment(o);
  bool streamed = false, tiled = false;
  for (int64_t side : {64, 384, 1024, 2048, 4096}) {
    const TileChoice tile = choose_tile(TileChoiceOptions().with_tile(side), extent, alignment, [](const Index&) {
      return int64_t{0};
    });
    const ModeChoice m = choose_mode(o, extent, tile, strip, 0);
    EXPECT_DOUBLE_EQ(m.tile_time, tile_recompute(o, extent, side));
    EXPECT_DOUBLE_EQ(m.stream_time, strip.predicted_time);
    EXPECT_EQ(m.stream, m.stream_time < m.tile_time) << side << ": " << m.why;
    (m.stream ? streamed : tiled) = true;
    // The same tiles against a stream predicted a hair slower or faster: the choice follows.
    StripChoice slower = strip, faster = strip;
    slower.predicted_time = m.tile_time * 1.01;
    faster.predicted_time = m.tile_time * 0.99;
    EXPECT_FALSE(choose_mode(o, extent, tile, slower, 0).stream) << side;
    EXPECT_TRUE(choose_mode(o, extent, tile, faster, 0).stream) << side;
  }
  EXPECT_TRUE(streamed);  // small tiles recompute more than the strips lose
  EXPECT_TRUE(tiled);     // one tile of the whole image recomputes nothing
  // Bands multiply the stream's time by what they recompute.
  const int64_t band = band_rows(o, extent, 4);
  const TileChoice whole = choose_tile(TileChoiceOptions().with_tile(4096), extent, alignment, [](const Index&) {
    return int64_t{0};
  });
  EXPECT_DOUBLE_EQ(choose_mode(o, extent, whole, strip, band).stream_time,
                   strip.predicted_time * band_recompute(o, extent, band));
  // One tile that would hold more than twice the stream's memory: the stream, saying why.
  TileChoice heavy = whole;
  heavy.predicted_bytes = int64_t(kStreamMemoryAdvantage * double(strip.predicted_bytes)) + 1;
  const ModeChoice m = choose_mode(o, extent, heavy, strip, 0);
  EXPECT_TRUE(m.stream);
  EXPECT_NE(m.why.find("as one tile would hold"), std::string::npos) << m.why;
}

// Column groups one after another where all their pieces together still recompute little:
// what the stream holds is then the widest group's, not the whole width's.
TEST(StripChoice, ColumnGroupsWhereAllTheirPiecesRecomputeLittle) {
  const UNetOptions o = unet_preset("unet-tiny");
  for (int64_t count : {1, 2, 3, 5})
    expect_widths_on_grid(group_widths(o, {100, 1000}, count), 1000, count, kStreamGroupGrid);
  const Index extent{4096, 4096};
  EXPECT_DOUBLE_EQ(groups_recompute(o, extent, 1, 2), column_recompute(o, extent, 2));
  EXPECT_GT(groups_recompute(o, extent, 2, 2), column_recompute(o, extent, 2));
  for (int64_t groups = 1; groups <= kStreamMaxGroups; ++groups)
    std::printf("unet-tiny, 4096 wide, 2 pieces a group: %lld groups recompute %.4fx\n", (long long)groups,
                groups_recompute(o, extent, groups, 2));
  const int64_t chosen = stream_groups(o, extent, 2);
  EXPECT_GE(chosen, 2);
  EXPECT_LE(groups_recompute(o, extent, chosen, 2), kStreamColumnRecompute);
  if (chosen < kStreamMaxGroups) EXPECT_GT(groups_recompute(o, extent, chosen + 1, 2), kStreamColumnRecompute);
  EXPECT_EQ(stream_groups(o, {4096, 2048}, 2), 1);  // 4 pieces of 512 recompute more than kStreamColumnRecompute
  EXPECT_EQ(stream_groups(o, {4096, 200}, 1), 1);   // narrower than the group grid
  const StripChoice c = choose_strip(o, extent, int64_t{64} << 30, 0, 2);
  EXPECT_EQ(c.groups, chosen);
  EXPECT_NE(c.summary().find(std::to_string(chosen) + " column groups one after another"), std::string::npos)
      << c.summary();
  const Index widest{4096, group_widths(o, extent, chosen).front()};
  EXPECT_EQ(c.predicted_bytes, columns_footprint(o, widest, c.strip, 2).bytes);
  EXPECT_LT(c.predicted_bytes, columns_footprint(o, extent, c.strip, 2).bytes);
}

}  // namespace
}  // namespace tessera
