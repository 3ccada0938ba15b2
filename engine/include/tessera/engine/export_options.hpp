#pragma once
// What `tessera export` and `tessera import` are asked, declared once: fields() drives each
// command's flags (each key is its flag, `example_input` → --example-input), their help and
// shown defaults, and validate(), whose messages name the flags. Torch-free.
#include <cstdint>
#include <string>

namespace tessera::engine {

struct ExportOptions {
  std::string checkpoint;      ///< required: a Tessera checkpoint
  std::string out;             ///< required: model.pt, a dict of tensors for Python's torch.load
  std::string arch;            ///< model.json; "" = `out` with .json
  std::string example_input;   ///< with example_output: a seeded random input saved here
  std::string example_output;  ///< … and the network's logits on it
  int64_t example_size = 0;    ///< example input side; 0 = the smallest comfortable valid side
  int64_t example_batch = 2;
  uint64_t example_seed = 0;

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(ExportOptions& o, V& v) {
  v.field("checkpoint", o.checkpoint, "Tessera checkpoint (RUN/checkpoints/last.pt)");
  v.field("out", o.out, "Weights file: a dict of tensors that Python's torch.load reads");
  v.field("arch", o.arch, "Architecture, normalisation and class names (default: OUT with .json)");
  v.field("example_input", o.example_input, "Also save a seeded random input tensor here (for checks)");
  v.field("example_output", o.example_output, "... and the network's logits on it (eval mode) here");
  v.field("example_size", o.example_size, "Example input side (0, the default: smallest comfortable valid side)");
  v.field("example_batch", o.example_batch, "Example batch size");
  v.field("example_seed", o.example_seed, "Seed of the example input");
}

struct ImportOptions {
  std::string weights;  ///< required: torch.save(net.state_dict(), …)
  std::string arch;     ///< model.json; "" = `weights` with .json
  std::string out;      ///< required: the checkpoint to write

  /// The checks that need no file, each error naming the flag. Throws tessera::Error.
  void validate() const;
};

template <class V>
void fields(ImportOptions& o, V& v) {
  v.field("weights", o.weights, "torch.save(net.state_dict(), ...) file, names as tessera export writes");
  v.field("arch", o.arch, "model.json from tessera export (default: WEIGHTS with .json)");
  v.field("out", o.out, "Checkpoint to write (usable by tessera infer --checkpoint)");
}

}  // namespace tessera::engine
