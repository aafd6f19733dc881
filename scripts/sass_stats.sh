#!/usr/bin/env bash
# Static instruction counts of a CUDA source's MMA loops, without a GPU: compiles SOURCE to a cubin (sm_90a for
# files under src/kernels/cuda/sm90a/, else sm_90; ARCH overrides), disassembles it with cuobjdump (fetched by
# scripts/fetch_cuobjdump.sh where the toolkit has none) and prints, per kernel whose mangled name contains one
# of the substrings, its innermost MMA loops: instructions, MMAs, instructions per MMA, opcode mix
# (scripts/sass_loop_stats.py). The notes (docs/w4a16-kernel-notes.md) use it to compare kernel versions.
#
# Usage: scripts/sass_stats.sh SOURCE.cu [NAME_SUBSTRING ...]
#   e.g. scripts/sass_stats.sh src/kernels/cuda/sm90a/wna16_wgmma_tiles_a.cu 'ILb1ELi64ELi2E'
# Env:   ARCH (sm_90 / sm_90a), KEEP=dir (keep the cubin and the SASS there)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { sed -n '2,10p' "$0"; exit 2; }
src=$1
shift
source scripts/cubin_lib.sh
dir=${KEEP:-$(mktemp -d)}
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir"
base=$(basename "$src" .cu)
compile_cubin "$src" "$dir/$base.cubin"
PATH="$(dirname "$CUOBJDUMP"):$PATH" "$CUOBJDUMP" -sass "$dir/$base.cubin" >"$dir/$base.sass"
python3 scripts/sass_loop_stats.py "$dir/$base.sass" "$@"
