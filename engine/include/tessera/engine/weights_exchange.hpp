#pragma once
// `tessera export` / `tessera import` as a library: weights exchange with Python (PyTorch).
//
// model.pt is a dict {state_dict name → tensor} that Python's torch.load reads (the names
// are UNetImpl's: enc0.conv0.weight, enc0.norm0.running_mean, up0.weight, head.bias, …);
// model.json carries the architecture, the input normalisation and the class names.
// python/tessera_unet.py rebuilds the same network in PyTorch from the pair. Import takes
// what Python's `torch.save(net.state_dict(), path)` writes, checks every name and shape
// against the architecture, and writes a checkpoint that `tessera infer --checkpoint` uses.
// Export with example_input / example_output also runs the network (eval mode) on a seeded
// random input and saves input and logits, so a Python port can be checked against Tessera
// on the same numbers (tests/export/). Every file is written under a temporary name and
// renamed (tessera/run/staged_file.hpp). Torch-free header.
#include "tessera/engine/export_options.hpp"

namespace tessera::engine {

/// Writes model.pt and model.json (and the example tensors); prints what it wrote.
/// Throws tessera::Error naming the flag or the file.
void export_weights(const ExportOptions& o);

/// Writes the checkpoint; prints what it wrote. Throws tessera::Error naming the file and,
/// for a tensor that does not fit the architecture, its name and shapes.
void import_weights(const ImportOptions& o);

}  // namespace tessera::engine
