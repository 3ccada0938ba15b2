// tessera export / import (being written).
#include "commands.hpp"

namespace tessera::cli {
void register_export(CLI::App& /*app*/) {}
}  // namespace tessera::cli
