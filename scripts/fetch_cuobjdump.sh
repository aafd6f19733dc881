#!/usr/bin/env bash
# Unpacks NVIDIA's cuobjdump and the nvdisasm it runs for SASS (PyPI wheels nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm, pinned by version and SHA-256) into .cache/cuobjdump-<version>/bin, for
# scripts/sass_stats.sh on machines whose CUDA toolkit has nvcc but not these. Prints cuobjdump's path.
# Idempotent; needs python3 with pip and unzip.
set -euo pipefail
cd "$(dirname "$0")/.."
version=13.2.51
declare -A sha256=(
  [cuobjdump]=95c69d3ddf0c2c1f535ec44c3433a66aeee19f588d9d22f73356e20b25f12b50
  [nvdisasm]=5a7acf77c55d6d2911ed6155d4d5bc156ffadf9df7a68a89b0c1155f4b13688c
)
dest=.cache/cuobjdump-$version
if [[ ! -x $dest/bin/cuobjdump || ! -x $dest/bin/nvdisasm ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$dest/bin"
  for tool in cuobjdump nvdisasm; do
    python3 -m pip download --quiet --no-deps --only-binary=:all: "nvidia-cuda-$tool==$version" -d "$tmp" >&2
    wheel=$(ls "$tmp"/nvidia_cuda_"$tool"-"$version"-*.whl)
    echo "${sha256[$tool]}  $wheel" | sha256sum -c --quiet || {
      echo "fetch_cuobjdump: $wheel does not match the pinned SHA-256" >&2
      exit 1
    }
    unzip -q -o "$wheel" "nvidia/cu13/bin/$tool" -d "$tmp/x"
    mv "$tmp/x/nvidia/cu13/bin/$tool" "$dest/bin/"
    chmod +x "$dest/bin/$tool"
  done
fi
echo "$PWD/$dest/bin/cuobjdump"
