#pragma once
// Windows of an ImageSource as network-ready tensors.
// read_window returns (C, spatial...) float for any box — inside, across or outside the
// image — filling what lies outside by reflection (reflect_index), so every tile sees the
// same values a whole-image pass over the reflect-padded image would. Normalisation is
// applied per channel; nodata/NaN pixels become 0 and are marked false in `valid`.
#include <torch/types.h>

#include "tessera/core/image_source.hpp"

namespace tessera {

struct Window {
  torch::Tensor values;  ///< (C, spatial...) float, normalised, no NaN
  torch::Tensor valid;   ///< (spatial...) bool: every channel had data
};

Window read_window(const ImageSource& source, const Box& box, const Normalization& norm);

/// Integer labels for `box` (inside the image), shape (spatial...) int64.
/// Pixels that are nodata, NaN or outside [0, classes) become `ignore_index`.
torch::Tensor read_labels(const ImageSource& labels, const Box& box, int classes, int64_t ignore_index);

torch::Tensor to_tensor(const Block<float>& block);
Block<uint8_t> to_block_u8(const torch::Tensor& labels);  // (spatial...) → (1, spatial...)

/// Normalisation that leaves values unchanged, for `channels` channels.
Normalization identity_normalization(int channels);

}  // namespace tessera
