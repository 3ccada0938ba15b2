#include "tessera/core/memory_model.hpp"

#include <algorithm>
#include <cmath>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

constexpr int64_t kFloatBytes = 4;

}  // namespace

std::string to_string(PipelineScheduleKind s) { return s == PipelineScheduleKind::kGPipe ? "gpipe" : "1f1b"; }

PipelineScheduleKind parse_pipeline_schedule(const std::string& s) {
  if (s == "gpipe") return PipelineScheduleKind::kGPipe;
  if (s == "1f1b") return PipelineScheduleKind::kOneFOneB;
  throw Error("schedule: '" + s + "' is not one of gpipe, 1f1b");
}

std::string to_string(ActivationCheckpoint c) {
  switch (c) {
    case ActivationCheckpoint::kNever: return "never";
    case ActivationCheckpoint::kAlways: return "always";
    case ActivationCheckpoint::kExceptLast: return "except_last";
  }
  return "?";
}

ActivationCheckpoint parse_activation_checkpoint(const std::string& s) {
  if (s == "never") return ActivationCheckpoint::kNever;
  if (s == "always") return ActivationCheckpoint::kAlways;
  if (s == "except_last") return ActivationCheckpoint::kExceptLast;
  throw Error("activation_checkpoint: '" + s + "' is not one of never, always, except_last");
}

StageTerms stage_terms(const LayerSequence& seq, int first, int last, bool training,
                       const std::vector<int64_t>& extra) {
  TESSERA_CHECK(first >= 0 && first <= last && last < seq.size());
  if (!extra.empty() && static_cast<int>(extra.size()) != seq.size())
    throw Error("stage memory: extra_bytes has " + std::to_string(extra.size()) + " entries for " +
                std::to_string(seq.size()) + " layers");
  StageTerms t;
  int64_t received = 0;
  if (training) {
    received += seq.layers[first].in_elements * kFloatBytes;  // received activation / network input
    for (const auto& s : seq.skips)
      if (s.producer < first && s.consumer >= first && s.consumer <= last) received += s.cropped_elements * kFloatBytes;
  }
  int64_t kept = 0, work = 0, block_input = 0;
  for (int x = first; x <= last; ++x) {
    const Layer& l = seq.layers[x];
    t.fixed += layer_bytes(l, 1, training) - (training ? l.saved_bytes : 0);
    int64_t live = (l.in_elements + l.out_elements) * kFloatBytes;
    if (training) {
      kept += l.saved_bytes;
      if (!extra.empty()) live += extra[size_t(x)];
      work = std::max(work, received + kept + live);
      continue;
    }
    // Inference, as run_layers (unet.cpp) holds tensors: a ReLU after the stage's first layer
    // runs in place (one tensor); a convolution block's input stays alive until the block ends
    // (the next pooling, up-sampling or head), so it sits beside every later layer of the block.
    if (l.kind == LayerKind::kActivation && x > first) live = l.out_elements * kFloatBytes;
    if (l.kind == LayerKind::kPool || l.kind == LayerKind::kUp || l.kind == LayerKind::kHead) block_input = 0;
    if (l.kind == LayerKind::kConv && l.name.ends_with(".conv0")) block_input = l.in_elements * kFloatBytes;
    else live += block_input;
    // Skips this stage holds at layer x (after their producer, up to and including the
    // concatenation, which releases them): those consumed here, whether produced here or received.
    for (const auto& s : seq.skips)
      if (s.consumer <= last && s.consumer >= first && s.producer < x && x <= s.consumer)
        live += (s.producer >= first ? s.elements : s.cropped_elements) * kFloatBytes;
    work = std::max(work, live);
  }
  if (training) {
    // A stage keeps the output it sent on until that micro-batch's backward (the root of its
    // autograd graph). ReLU, pool, concatenation and head outputs are already in `kept`; a
    // convolution's, norm's or up-sampling's is counted at the layer consuming it, which
    // lives on the next stage, so here it is held twice.
    const Layer& out = seq.layers[size_t(last)];
    const bool counted = out.kind == LayerKind::kActivation || out.kind == LayerKind::kPool ||
                         out.kind == LayerKind::kConcat || out.kind == LayerKind::kHead || out.kind == LayerKind::kTail;
    t.per_flight = received + kept + (last + 1 < seq.size() && !counted ? out.out_elements * kFloatBytes : 0);
    t.received = received;
    t.current = work;
  } else {
    t.fixed += work;
  }
  return t;
}

int StageMemoryOptions::in_flight(int from_end) const {
  if (!training) return 1;
  return schedule == PipelineScheduleKind::kGPipe ? micro_batches : std::min(micro_batches, from_end);
}

void StageMemoryOptions::validate() const {
  if (micro_batches < 1) throw Error("stage memory: micro_batches must be >= 1, got " + std::to_string(micro_batches));
}

int64_t stage_bytes(const LayerSequence& seq, int first, int last, int from_end, const StageMemoryOptions& o) {
  o.validate();
  return stage_terms(seq, first, last, o.training, o.extra_bytes).bytes(o.in_flight(from_end), o.checkpoint);
}

LayerSequence box_layer_sequence(const UNetOptions& model, const Index& input_sides) {
  std::vector<LayerSequence> axes;
  for (int64_t s : input_sides) axes.push_back(unet_layer_sequence(model, s));
  auto volume = [&](auto side) {
    int64_t v = 1;
    for (const auto& a : axes) v *= side(a);
    return v;
  };
  LayerSequence seq = axes.front();
  for (size_t i = 0; i < seq.layers.size(); ++i) {
    Layer& l = seq.layers[i];
    l.in_elements = l.in_channels * volume([&](const LayerSequence& a) { return a.layers[i].in_side; });
    l.out_elements = l.out_channels * volume([&](const LayerSequence& a) { return a.layers[i].out_side; });
    // What a layer keeps is a whole number of bytes per output element (4, 12 or 0).
    const Layer& cube = axes.front().layers[i];
    l.saved_bytes = cube.out_elements > 0 ? cube.saved_bytes / cube.out_elements * l.out_elements : 0;
    // FLOPs are per element of the output (of the input for the up-sampling decoder's 1×1
    // convolution, which runs before the up-sampling).
    const bool on_input = l.kind == LayerKind::kUp && model.decoder == Decoder::kUpsample;
    l.flops = on_input ? cube.flops / double(cube.in_elements) * double(l.in_elements)
                       : cube.flops / double(cube.out_elements) * double(l.out_elements);
  }
  for (SkipEdge& e : seq.skips) {
    e.elements = seq.layers[size_t(e.producer)].out_elements;
    e.cropped_elements = seq.layers[size_t(e.producer)].out_channels *
                         volume([&](const LayerSequence& a) { return a.layers[size_t(e.consumer)].out_side; });
  }
  return seq;
}

int64_t inference_bytes(const UNetOptions& model, const Index& steps, int batch, bool read_ahead) {
  TESSERA_CHECK(batch >= 1 && static_cast<int>(steps.size()) == model.dims);
  Index sides;
  for (int64_t s : steps) sides.push_back(s + unet_remainder(model) + 2 * unet_halo(model));
  const LayerSequence seq = box_layer_sequence(model, sides);
  const int64_t weights = kFloatBytes * seq.parameter_count();
  const int64_t network = stage_bytes(seq, 0, seq.size() - 1, 1, StageMemoryOptions{}.with_training(false)) - weights;
  const Layer& first = seq.layers.front();
  const int64_t values = first.in_elements * kFloatBytes, valid = first.in_elements / first.in_channels;
  // The batch being computed: its stacked input and valid masks (the network's own working
  // set counts the channels-last copy of the input at the first convolution). The batch read
  // ahead on the reader thread meanwhile: its windows' values, their stacked copy and masks.
  const int64_t loop = values + valid + (read_ahead ? 2 * values + valid : 0);
  return weights + int64_t(batch) * (network + loop);
}

}  // namespace tessera

namespace tessera {
namespace {

// Rows of a strip as they leave layer i, and the rows each layer keeps: the executor's rules.
class StreamDryRun {
 public:
  StreamDryRun(const UNetOptions& model, const Index& whole_input) : model_(model) {
    for (size_t a = 1; a < whole_input.size(); ++a) across_.push_back(unet_layer_sequence(model, whole_input[a]));
    const LayerSequence& seq = across_.front();
    carry_.assign(seq.layers.size(), 0);
    done_.assign(seq.layers.size(), 0);
    produced_.assign(seq.skips.size(), 0);
    for (const SkipEdge& e : seq.skips)
      crop_.push_back((seq.layers[size_t(e.producer)].out_side - seq.layers[size_t(e.consumer - 1)].out_side) / 2);
    first_ = crop_;  // the rows above the crop are never read, nor kept
  }
  // Elements of one row of layer i's input or output.
  int64_t row(size_t i, bool input) const {
    const Layer& l = across_.front().layers[i];
    int64_t n = input ? l.in_channels : l.out_channels;
    for (const LayerSequence& s : across_) n *= input ? s.layers[i].in_side : s.layers[i].out_side;
    return n;
  }
  // Pushes `rows` input rows; returns the peak elements of one layer's input and output.
  int64_t push(int64_t rows) {
    const LayerSequence& seq = across_.front();
    int64_t working = 0;
    for (size_t i = 0; i < seq.layers.size(); ++i) {
      const LayerKind kind = seq.layers[i].kind;
      const int64_t in = rows + carry_[i];
      int64_t out = rows;
      if (kind == LayerKind::kConv || kind == LayerKind::kHead) {
        const int64_t k = kind == LayerKind::kHead ? 1 : model_.kernel;
        out = std::max<int64_t>(0, in - (k - 1));
        carry_[i] = std::min(k - 1, in);
      } else if (kind == LayerKind::kPool) {
        out = in / 2;
        carry_[i] = in % 2;
      } else if (kind == LayerKind::kUp) {
        out = 2 * rows;
      } else if (kind == LayerKind::kConcat && rows > 0) {
        size_t e = 0;
        while (seq.skips[e].consumer != int(i)) ++e;
        done_[i] += rows;
        first_[e] = done_[i] + crop_[e];
      }
      if (out > 0) working = std::max(working, in * row(i, true) + out * row(i, false));
      for (size_t e = 0; e < seq.skips.size(); ++e)
        if (seq.skips[e].producer == int(i)) produced_[e] += out;
      rows = out;
    }
    return working;
  }
  int64_t held() const {
    const LayerSequence& seq = across_.front();
    int64_t n = 0;
    for (size_t i = 0; i < carry_.size(); ++i) n += carry_[i] * row(i, true);
    for (size_t e = 0; e < seq.skips.size(); ++e)
      n += std::max<int64_t>(0, produced_[e] - first_[e]) * skip_row(e);
    return n;
  }
  // Elements of one row of skip e as kept: the producer's channels, cropped across to the
  // decoder's sides.
  int64_t skip_row(size_t e) const {
    const SkipEdge& s = across_.front().skips[e];
    int64_t n = across_.front().layers[size_t(s.producer)].out_channels;
    for (const LayerSequence& a : across_) n *= a.layers[size_t(s.consumer)].out_side;
    return n;
  }
  int64_t logits_row() const { return row(across_.front().layers.size() - 1, false); }

 private:
  UNetOptions model_;
  std::vector<LayerSequence> across_;  // per axis after the first: the layers' sides across
  std::vector<int64_t> carry_, done_, produced_, first_, crop_;
};

}  // namespace

StreamFootprint stream_footprint(const UNetOptions& model, const Index& whole_input, int64_t strip) {
  TESSERA_CHECK(strip >= 1 && whole_input.size() >= 2 && static_cast<int>(whole_input.size()) == model.dims);
  StreamDryRun run(model, whole_input);
  StreamFootprint f;
  int64_t working = 0, carried = 0;
  for (int64_t fed = 0; fed < whole_input[0]; fed += strip) {
    working = std::max(working, run.push(std::min(strip, whole_input[0] - fed)));
    carried = std::max(carried, run.held());
  }
  int64_t across = 1;
  for (size_t a = 1; a < whole_input.size(); ++a) across *= whole_input[a];
  f.carried = kFloatBytes * carried;
  f.working = kFloatBytes * working;
  f.window = strip * across * (2 * kFloatBytes * model.in_channels + 1);
  f.logits = kFloatBytes * strip * run.logits_row();
  f.bytes = stream_resident_bytes(model, f.tensors());
  return f;
}

int64_t stream_resident_bytes(const UNetOptions& model, int64_t tensors) {
  return kFloatBytes * unet_parameter_count(model) + std::llround(kStreamResidentFactor * double(tensors));
}

}  // namespace tessera
