#pragma once
// Internal to `tessera export` / `tessera import` (weights_exchange.hpp): the two files Python
// and Tessera exchange, model.json (architecture, normalisation, class names) and model.pt
// (a dict of tensors under the state_dict names).
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tessera/core/checkpoint.hpp"
#include "tessera/core/unet.hpp"

namespace tessera::engine::exchange {

/// model.json beside model.pt unless given.
std::string default_arch(const std::string& weights);

/// The checkpoint's description (checkpoint.hpp's JSON) plus what a Python reader needs to
/// choose inputs; the trainer's private resume state stays out.
nlohmann::json arch_to_json(const CheckpointMeta& m);
/// Reads and checks model.json. Throws tessera::Error naming `path`.
CheckpointMeta arch_from_json(const std::string& path);

/// Parameters then buffers, under the names Python's state_dict uses.
std::vector<std::pair<std::string, torch::Tensor>> named_state(UNet& net);
/// A dict of tensors written by Python's torch.save or torch::pickle_save.
std::vector<std::pair<std::string, torch::Tensor>> read_weights(const std::string& path);
/// A tensor or a dict of tensors as torch.save writes it, staged (a crash never leaves half a file).
void save_tensor_file(const std::string& path, const c10::IValue& value);

std::string shape_str(c10::IntArrayRef s);

}  // namespace tessera::engine::exchange
