#!/usr/bin/env bash
# Set-up, build, then the whole test suite (unit, MPI-labelled, GUI-labelled, end-to-end).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tessera_setup
tessera_build
cd "$BUILD_DIR"
echo "== ctest"
ctest --output-on-failure -j "$JOBS" "$@"
