// Per-layer seconds of a micro-batch on a described device: a roofline per layer (model in
// simulator.hpp's header comment, "per layer").
#include <algorithm>
#include <cmath>

#include "tessera/parallel/plan/simulator.hpp"

namespace tessera::parallel {
namespace {

double element_bytes(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

// Bytes a memory-bound layer reads and writes per sample, forward and backward.
struct Traffic {
  double forward = 0, backward = 0;
};

Traffic memory_traffic(const Layer& l, bool seed_dropout, double b) {
  const double in = static_cast<double>(l.in_elements) * b, out = static_cast<double>(l.out_elements) * b;
  const double indices = static_cast<double>(l.out_elements) * 8;  // max pool's int64 indices
  switch (l.kind) {
    case LayerKind::kNorm:  // statistics pass + normalise (read x twice, write y); backward 5 passes
      // the seed's layer is Dropout2d + InstanceNorm: its dropout multiplies once each way
      return seed_dropout ? Traffic{5 * out, 7 * out} : Traffic{3 * out, 5 * out};
    case LayerKind::kActivation: return {2 * out, 3 * out};    // read x, write y; read y, dy, write dx
    case LayerKind::kPool: return {in + out + indices, 2 * in + out + indices};  // backward zero-fills dx
    case LayerKind::kUp: return {in + out, in + out};           // nearest: copy each way
    case LayerKind::kConcat: return {2 * out, 2 * out};         // copy both inputs; split the gradient
    case LayerKind::kHead:  // plus the loss on the logits (3 passes forward, 3 backward), charged to the
      return {in + out, 2 * (in + out) + 6 * out};  // backward since inference has no loss
    case LayerKind::kConv: return {in + out, 2 * (in + out)};
    case LayerKind::kTail: return {3 * out, 4 * out};  // SE: mean pass, scale (read x, write y); backward both
  }
  return {};
}

}  // namespace

ConvQuery conv_query(const Layer& l, int dims, int batch) {
  ConvQuery q;
  const double per_sample = static_cast<double>(l.out_elements) / static_cast<double>(std::max<int64_t>(1, l.out_channels));
  q.positions = per_sample * batch;
  q.in_channels = static_cast<double>(l.in_channels);
  q.out_channels = static_cast<double>(l.out_channels);
  q.taps = l.flops / (2 * q.in_channels * q.out_channels * per_sample);
  // stride 1: `same` keeps the side, `valid` loses 2; a transposed (up) convolution grows it
  q.winograd_shape = dims == 2 && std::abs(q.taps - 9) < 1e-6 && l.out_side <= l.in_side && l.out_side + 2 >= l.in_side;
  return q;
}

LayerPassSeconds layer_pass_seconds(const LayerSequence& seq, const DeviceModel& d, Precision p, int batch) {
  const double peak = d.peak_flops(p), bw = d.memory_bytes_per_second, b = element_bytes(p);
  const bool measured = !d.convolutions.empty();
  const bool seed = seq.options.name.rfind("s0-", 0) == 0;
  // Without a table a micro-batch costs batch × one tile (the assumed curve has no batch term).
  const int per_call = measured ? batch : 1;
  const double repeat = measured ? 1.0 : batch;
  LayerPassSeconds t;
  for (size_t i = 0; i < seq.layers.size(); ++i) {
    const Layer& l = seq.layers[i];
    const Traffic bytes = memory_traffic(l, seed && l.kind == LayerKind::kNorm, b);
    double f = bytes.forward * per_call / bw, bwd = bytes.backward * per_call / bw;
    if (l.flops > 0) {
      const double flops = l.flops * per_call;
      if (measured) {
        const ConvQuery q = conv_query(l, seq.options.dims, per_call);
        auto seconds = [&](ConvPass pass) { return flops / (peak * d.convolutions.efficiency(p, pass, q)); };
        f = std::max(f, seconds(ConvPass::kForward));
        // the network's input needs no gradient: its first convolution skips backward-data
        const double data = i == 0 ? 0.0 : seconds(ConvPass::kBackwardData);
        bwd = std::max(bwd, data + seconds(ConvPass::kBackwardWeights));
      } else {
        const double positions = static_cast<double>(l.out_elements) / static_cast<double>(l.out_channels);
        const double c = flops / (peak * d.efficiency.at(positions));
        f = std::max(f, c);
        bwd = std::max(bwd, 2 * c);
      }
    }
    t.forward.push_back((f + d.launch_seconds) * repeat);
    t.backward.push_back((bwd + 2 * d.launch_seconds) * repeat);
  }
  return t;
}

std::vector<double> layer_forward_seconds(const LayerSequence& seq, const DeviceModel& d, Precision p) {
  return layer_pass_seconds(seq, d, p, 1).forward;
}

}  // namespace tessera::parallel
