// Probe for tests/boundaries: torch-free core headers every torch-free target may include.
#include "tessera/core/error.hpp"
#include "tessera/core/geometry.hpp"
#include "tessera/core/tile_grid.hpp"
#include "tessera/core/unet_spec.hpp"

int main() { return tessera::UNetOptions{}.dims == 2 ? 0 : 1; }
