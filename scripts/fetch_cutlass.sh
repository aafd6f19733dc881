#!/usr/bin/env bash
# Unpacks CUTLASS's C++ headers (NVIDIA, BSD-3-Clause), pinned by version and SHA-256, into
# .cache/cutlass-<version>/{include,util/include} for the sm_90a FP8 GEMM kernels
# (cmake/Cutlass.cmake). The headers come from PyPI's nvidia-cutlass wheel, which ships them.
# Idempotent; needs python3 with pip and unzip (scripts/setup.sh installs them when nvcc exists).
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.2.0.0
sha256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6
dest=.cache/cutlass-$version
if [[ -f $dest/include/cutlass/cutlass.h && -f $dest/util/include/cutlass/util/packed_stride.hpp ]]; then
  echo "fetch_cutlass: $dest present"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: "nvidia-cutlass==$version" -d "$tmp"
wheel=$(ls "$tmp"/nvidia_cutlass-"$version"-*.whl)
echo "$sha256  $wheel" | sha256sum -c --quiet || { echo "fetch_cutlass: $wheel does not match the pinned SHA-256" >&2; exit 1; }
unzip -q "$wheel" 'cutlass_library/source/include/*' 'cutlass_library/source/tools/util/include/*' \
  'nvidia_cutlass-*.dist-info/licenses/LICENSE.txt' -d "$tmp/x"
rm -rf "$dest" && mkdir -p "$dest/util"
mv "$tmp/x/cutlass_library/source/include" "$dest/include"
mv "$tmp/x/cutlass_library/source/tools/util/include" "$dest/util/include"
mv "$tmp"/x/nvidia_cutlass-*.dist-info/licenses/LICENSE.txt "$dest/"
echo "fetch_cutlass: CUTLASS $version headers in $dest"
