// Probe for tests/boundaries: a LibTorch-part header, which a torch-free target must not find.
#include "tessera/core/unet.hpp"

int main() { return 0; }
