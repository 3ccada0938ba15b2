#include "tessera/core/decomposition.hpp"

#include <torch/torch.h>

namespace tessera {
namespace {
thread_local const Decomposition* active = nullptr;
}  // namespace

const Decomposition* active_decomposition() { return active; }

torch::Tensor global_average_pool(const torch::Tensor& x) {
  const torch::Tensor sums = x.flatten(2).sum(2);
  const double pixels = double(x.flatten(2).size(2));
  if (active == nullptr) return sums / pixels;
  const torch::Tensor count = active->image_sum(torch::full({1}, pixels, x.options()));
  return active->image_sum(sums) / count;
}

DecompositionScope::DecompositionScope(const Decomposition& d) : previous_(active) { active = &d; }

DecompositionScope::~DecompositionScope() { active = previous_; }

}  // namespace tessera
