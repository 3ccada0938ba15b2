#!/usr/bin/env bash
# Installs Tessera's QGIS plugin (integrations/qgis/tessera_processing) into a QGIS profile and
# enables it, for QGIS and qgis_process alike.
# Usage: install.sh [PROFILES_DIR [PROFILE]]
#   PROFILES_DIR  QGIS's profiles root (default ~/.local/share/QGIS/QGIS3); tests give a
#                 temporary one and run QGIS with QGIS_CUSTOM_CONFIG_PATH pointing at it
#   PROFILE       default "default"
# The algorithms run the `tessera` command: on the PATH, or set TESSERA_EXECUTABLE.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${1:-$HOME/.local/share/QGIS/QGIS3}"
PROFILE="${2:-default}"
PLUGINS="$ROOT/profiles/$PROFILE/python/plugins"
# Debian's /usr/bin/qgis_process wrapper passes --noversioncheck, which qgis_process refuses
# (QGIS 3.22): call the program itself when it is there.
QGIS_PROCESS=$(command -v qgis_process.bin || command -v qgis_process) \
  || { echo "install.sh: qgis_process not found (scripts/setup.sh installs qgis)" >&2; exit 1; }
mkdir -p "$PLUGINS"
rm -rf "$PLUGINS/tessera_processing"
cp -r "$HERE/tessera_processing" "$PLUGINS/"
find "$PLUGINS/tessera_processing" -name __pycache__ -prune -exec rm -rf {} +
QT_QPA_PLATFORM=offscreen QGIS_CUSTOM_CONFIG_PATH="$ROOT" "$QGIS_PROCESS" plugins enable tessera_processing >/dev/null 2>&1 \
  || { echo "install.sh: qgis_process could not enable tessera_processing in $ROOT/profiles/$PROFILE" >&2; exit 1; }
echo "installed tessera_processing into $PLUGINS (enabled)"
