#!/usr/bin/env bash
# scripts/gpu_check.sh [-- CHECK_FLAGS...]: Tessera on a GPU machine, one command. Finds the
# LibTorch of the PyTorch installed there (python3 -c 'import torch;
# print(torch.utils.cmake_prefix_path)'), configures the LibTorch-only build (cmake --preset
# gpu-core: no GDAL, ITK, DCMTK, MPI or Qt) with CUDA and NCCL in build-gpu/, builds
# tessera-gpu-check and runs it on CUDA device 0, which writes gpu_check.json (docs/gpu.md):
# forward/backward and tiled inference against the CPU, training steps, throughput against
# PyTorch eager, NCCL with one rank, NVML telemetry. Exit status: the check's (0 = all passed).
#
# Besides LibTorch the build needs nlohmann-json, fmt, CLI11 and zlib's headers. Where they
# are missing (a machine with no package manager), stage them on a Debian machine and carry
# the folder along:   scripts/gpu_check.sh --stage-deps .gpu-deps
# The build then finds them in .gpu-deps (or TESSERA_GPU_DEPS).
#
# Environment: PYTHON (python3), TESSERA_GPU_BUILD_DIR (build-gpu), TESSERA_GPU_OUT
# (gpu_check.json), TESSERA_JOBS (all cores), NCCL_ROOT (else the nvidia-nccl wheel's folder).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

stage_deps() {  # Debian: copy the packages' files (headers, CMake configs, libraries) to $1/usr/...
  local dest="$1" pkg
  mkdir -p "$dest"
  for pkg in nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9 zlib1g-dev zlib1g; do
    dpkg -L "$pkg" | while read -r f; do
      [ -f "$f" ] || [ -L "$f" ] || continue
      mkdir -p "$dest$(dirname "$f")" && cp -a "$f" "$dest$f"
    done
  done
  du -sh "$dest"
}
if [ "${1:-}" = "--stage-deps" ]; then
  stage_deps "${2:?usage: scripts/gpu_check.sh --stage-deps DIR}"
  exit 0
fi
if [ $# -gt 0 ]; then
  [ "$1" = "--" ] || { echo "usage: scripts/gpu_check.sh [-- CHECK_FLAGS...] | --stage-deps DIR" >&2; exit 2; }
  shift
fi

PY="${PYTHON:-python3}"
BUILD="${TESSERA_GPU_BUILD_DIR:-$ROOT/build-gpu}"
OUT="${TESSERA_GPU_OUT:-$ROOT/gpu_check.json}"
JOBS="${TESSERA_JOBS:-$(nproc)}"
torch_prefix="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')" || {
  echo "gpu_check: $PY cannot import torch (set PYTHON to the python that has PyTorch)" >&2; exit 1; }
echo "== PyTorch $("$PY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)') at $torch_prefix"

prefixes="$torch_prefix"
deps="${TESSERA_GPU_DEPS:-$ROOT/.gpu-deps}"
extra=()
if [ -d "$deps/usr" ]; then
  prefixes="$prefixes;$deps/usr"
  extra+=(-DZLIB_ROOT="$deps/usr")
  echo "== staged packages from $deps"
fi
# NCCL: NCCL_ROOT, else the nvidia-nccl wheel that PyTorch's CUDA build depends on.
nccl_root="${NCCL_ROOT:-$("$PY" - <<'PYEOF' 2>/dev/null || true
import glob, os, site
for base in site.getsitepackages():
    for h in sorted(glob.glob(os.path.join(base, "nvidia", "**", "nccl.h"), recursive=True)):
        print(os.path.dirname(os.path.dirname(h)))
        raise SystemExit
PYEOF
)}"
[ -n "$nccl_root" ] && extra+=(-DNCCL_ROOT="$nccl_root") && echo "== NCCL from $nccl_root"
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 || true)"

cd "$ROOT"
cmake --preset gpu-core -B "$BUILD" -DTESSERA_BUILD_TESTS=OFF -DCMAKE_PREFIX_PATH="$prefixes" \
  -DTORCH_CUDA_ARCH_LIST="${arch:-9.0}" "${extra[@]}" >"$BUILD.configure.log" 2>&1 || {
  tail -40 "$BUILD.configure.log" >&2; echo "gpu_check: configure failed (log: $BUILD.configure.log)" >&2; exit 1; }
grep -E "^-- Tessera:" "$BUILD.configure.log" || true
cmake --build "$BUILD" -j "$JOBS" --target tessera-gpu-check >"$BUILD.build.log" 2>&1 || {
  tail -40 "$BUILD.build.log" >&2; echo "gpu_check: build failed (log: $BUILD.build.log)" >&2; exit 1; }
echo "== tessera-gpu-check --device cuda → $OUT"
"$BUILD/cli/gpu_check/tessera-gpu-check" --device cuda --python "$PY" --out "$OUT" "$@"
