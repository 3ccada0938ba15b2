#pragma once
// The built-in `valid` U-Net run as a line-buffered pipeline: the input arrives in strips of
// rows along the first spatial axis (rows of NCHW, slices of NCDHW), each strip as wide as
// the whole (padded) input on the other axes, and every layer emits the output rows it can
// compute so far, keeping only what later rows still need:
//   convolution K     keeps its last K − 1 input rows (the next output row reads them again);
//   2× max pooling    keeps an odd last row until its partner arrives (pairs 0-1, 2-3, … of
//                     its whole input, as one forward pass pairs them);
//   up-sampling       emits 2 rows per input row, keeps nothing;
//   concatenation     the encoder's rows wait in a delay buffer until the decoder row they
//                     meet arrives (the skip's centre crop is a fixed row offset, the same for
//                     every input size of a valid U-Net) and are dropped once consumed;
//                     they are kept cropped across to the decoder's sides;
//   norm, ReLU, head  row-wise.
// So each feature is computed once and the rows coming out, concatenated, equal the forward
// pass over the whole input (UNetImpl::forward) up to float rounding, whatever the strip
// heights. The layers run through the network's own modules (find_layer_modules), so the
// weights, channels-last layout and dtype (bf16) are the network's.
//
// Not streamable (stream_refusal): a registry model, `same` padding (a border rule at the
// strip seams), group or instance norm (statistics over the whole window). Batch norm in
// eval mode is a per-channel affine map and streams. Tensors: N × C × rows × …; one executor
// per image, not thread safe.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/unet.hpp"

namespace tessera {

/// Why `o` cannot be streamed, or nullopt when it can.
std::optional<std::string> stream_refusal(const UNetOptions& o);

class StreamExecutor {
 public:
  /// `net` in eval mode; throws tessera::Error with stream_refusal()'s reason.
  explicit StreamExecutor(UNet& net);
  /// Feeds the next input rows (N, C, rows, sides…; the other sides fixed for the executor's
  /// life and valid for the network) and returns the logits rows that became computable
  /// (N, classes, k, output sides…), or an undefined tensor when none did.
  torch::Tensor push(const torch::Tensor& rows);

  int64_t rows_in() const { return rows_in_; }
  int64_t rows_out() const { return rows_out_; }
  /// FLOPs executed so far (convolutions, counted as LayerSequence counts them).
  double flops() const { return flops_; }
  /// Bytes of carried rows and skip delay buffers after the last push, and their peak (rows
  /// kept; a strip's skip chunk is freed when the decoder has passed its last row).
  int64_t held_bytes() const { return held_bytes_; }
  int64_t peak_held_bytes() const { return peak_held_bytes_; }

 private:
  torch::Tensor step(int i, torch::Tensor x);
  torch::Tensor convolve(int i, const torch::Tensor& x, int64_t kernel);
  /// Whether layer i's output is the input of a K > 1 convolution (i = −1: the strip).
  bool feeds_convolution(int i) const;
  /// Layer i's (a convolution's) whole input for `sizes` new rows, its carried rows already
  /// in front; returns the view the new rows are written to. So the rows are copied once, by
  /// the layer producing them (ReLU, concatenation, the strip's conversion), not joined again.
  torch::Tensor place(int i, c10::IntArrayRef sizes);
  torch::Tensor pool(int i, const torch::Tensor& x);
  torch::Tensor concat(int i, const torch::Tensor& x);
  void keep_skip(int i, const torch::Tensor& x);

  // The encoder rows [first, first + rows) of one skip, as the strips' chunks (views) that
  // hold them: appending or dropping rows copies nothing.
  struct SkipRows {
    std::deque<torch::Tensor> chunks;
    int64_t first = 0;
    int64_t rows = 0;
    /// Keeps x's rows (the encoder rows after the last kept one) from row `needed` on, as a
    /// chunk of their own: the rows above it the decoder never reads (the skip's top crop,
    /// 40 level-0 rows of unet-tiny that would wait for the decoder's first row).
    void append(const torch::Tensor& x, int64_t needed);
    void copy_to(int64_t from, const torch::Tensor& out) const;  ///< rows [from, from + out's rows) into out
    void drop_before(int64_t row);
  };
  UNet net_;
  LayerSequence seq_;
  std::vector<LayerModules> modules_;
  std::vector<torch::Tensor> carry_;  // by layer: the input rows a convolution or pooling carries
  std::vector<torch::Tensor> placed_; // by layer: a convolution's input for this strip, filled by place()
  std::vector<int64_t> consumed_;     // by layer: decoder rows a concatenation has consumed
  std::vector<SkipRows> skip_;        // by skip edge
  std::vector<int64_t> crop_;      // by skip edge: the centre crop per side, in rows
  int64_t rows_in_ = 0, rows_out_ = 0;
  double flops_ = 0;
  int64_t held_bytes_ = 0, peak_held_bytes_ = 0;
};

}  // namespace tessera
