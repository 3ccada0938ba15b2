#include "tessera/core/decomposition.hpp"

namespace tessera {
namespace {
thread_local const Decomposition* active = nullptr;
}  // namespace

const Decomposition* active_decomposition() { return active; }

DecompositionScope::DecompositionScope(const Decomposition& d) : previous_(active) { active = &d; }

DecompositionScope::~DecompositionScope() { active = previous_; }

}  // namespace tessera
