#pragma once
// Python pickles as PyTorch writes them, as far as Tessera must understand them to read a
// state_dict saved by `torch.save(net.state_dict(), path)` (the data.pkl record of its zip
// archive). The tensors themselves are read by LibTorch's unpickler in the caller (cli's
// `tessera import`); this is the torch-free byte-level part. Pure functions, no I/O.
#include <string>

namespace tessera::io {

/// LibTorch 1.13's unpickler turns a call of collections.OrderedDict into None and knows
/// neither SETITEM nor BUILD on a dict, so a state_dict pickle does not load
/// (pytorch/pytorch#100741, fixed in PyTorch 2.6). Returns the same pickle with the
/// OrderedDict as a plain dict (EMPTY_DICT, MARK key value SETITEMS, the state and BUILD
/// dropped); any other pickle, or one holding an opcode this rewrite does not know, is
/// returned unchanged for the unpickler to judge.
std::string plain_dict_pickle(const std::string& pkl);

}  // namespace tessera::io
