#!/usr/bin/env bash
# Installs every Debian package Tessera's build, demo and tests need.
# Idempotent: when everything is present it prints one line and returns.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libopenblas0-pthread
  libopenmpi-dev openmpi-bin
  libgdal-dev gdal-bin
  libinsighttoolkit5-dev libgdcm-dev libgdcm-tools
  qt6-base-dev libgl-dev
  libopencv-dev
  libgtest-dev libgmock-dev
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  python3-torch python3-rasterio python3-numpy python3-gdal
  libdcmtk-dev dicom3tools python3-pydicom python3-nibabel   # DICOM SEG output and its checks (cli.dicom_seg)
  clang-14 libclang-rt-14-dev   # libFuzzer targets (tests/fuzz)
  libcurl4-openssl-dev orthanc orthanc-dicomweb   # DICOMweb client (io/src/dicomweb_http.cpp); a PACS for cli.pacs_dicomweb
  qgis python3-qgis qgis-providers   # the QGIS Processing provider (integrations/qgis) and cli.qgis_provider
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} system packages present"
  exit 0
fi

echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/tessera-apt.log 2>&1 || {
  echo "setup: apt-get install failed; last lines of /tmp/tessera-apt.log:" >&2
  tail -20 /tmp/tessera-apt.log >&2
  exit 1
}
echo "setup: done"
