# Shared by demo.sh and test.sh: set-up and build. Source it; do not run it.
set -euo pipefail
TESSERA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${TESSERA_BUILD_DIR:-$TESSERA_ROOT/build}"
SAMPLE_DIR="$TESSERA_ROOT/sample_data/generated"
JOBS="${TESSERA_JOBS:-$(nproc)}"

tessera_setup() {
  "$TESSERA_ROOT/scripts/setup.sh"
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-8G}"
  # Paths below the checkout are hashed relative to it, so another clone hits the same cache.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$TESSERA_ROOT}"
  # Under mpirun as root on a small machine.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

tessera_build() {
  echo "== build ($BUILD_DIR, $JOBS jobs)"
  mkdir -p "$BUILD_DIR"
  cmake -S "$TESSERA_ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$BUILD_DIR/configure.log" 2>&1 || {
    cat "$BUILD_DIR/configure.log" >&2
    echo "configure failed (log above)" >&2
    exit 1
  }
  cmake --build "$BUILD_DIR" -j "$JOBS" "$@"
}

# Deterministic sample data, regenerated when the generator changes.
tessera_sample_data() {
  local gen="$BUILD_DIR/sample_data/tessera-make-sample"
  local stamp="$SAMPLE_DIR/.generator-$(sha1sum "$gen" | cut -c1-12)"
  if [ ! -f "$stamp" ]; then
    echo "== generating sample data in $SAMPLE_DIR"
    rm -rf "$SAMPLE_DIR"
    mkdir -p "$SAMPLE_DIR"
    "$gen" --out "$SAMPLE_DIR"
    touch "$stamp"
  fi
}
