#!/usr/bin/env bash
# Whether a change alters the machine code of CUDA kernels, without a GPU: compiles each SOURCE from the working tree
# and from revision REV (a temporary git worktree) to cubins as scripts/sass_stats.sh does, and compares them kernel by
# kernel (scripts/sass_diff.py): identical SASS (instruction for instruction, immediates included), or the
# instruction counts, registers and spill bytes (ptxas) of both. A refactor whose kernels all come out identical
# cannot change their speed and needs no timing on the device; one that differs does (docs/w4a16-kernel-notes.md,
# v7o).
# Exit status: 0 every kernel identical, 1 some differ or exist on one side only, 2 usage or build errors.
#
# Usage: scripts/sass_diff.sh REV SOURCE.cu [SOURCE.cu ...]
#   e.g. scripts/sass_diff.sh HEAD src/kernels/cuda/wna16_stream_kernels.cu src/kernels/cuda/sm90a/wna16_wgmma_tiles_a.cu
# Env:   ARCH (as sass_stats.sh), KEEP=dir (keep the cubins, SASS and ptxas reports there), JOBS (parallel compiles,
#        default 2), RENAME='REGEX=>REPLACEMENT' (the new side's mangled names mapped back, for a change that adds a
#        defaulted template parameter; scripts/sass_diff.py)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 2 ]] || { sed -n '2,13p' "$0"; exit 2; }
rev=$1
shift
git rev-parse --verify --quiet "$rev^{commit}" >/dev/null || { echo "sass_diff: no revision '$rev'" >&2; exit 2; }
source scripts/cubin_lib.sh
dir=${KEEP:-$(mktemp -d)}
base_tree=$(mktemp -d)
cleanup() {
  git worktree remove --force "$base_tree" >/dev/null 2>&1 || rm -rf "$base_tree"
  [[ -n ${KEEP:-} ]] || rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/new" "$dir/base"
git worktree add --detach --quiet "$base_tree" "$rev"
# One compile: the tree's root, the source, the output stem.
build() {
  local root=$1 src=$2 stem=$3
  (cd "$root" && compile_cubin "$src" "$stem.cubin" --resource-usage) >"$stem.ptxas" 2>&1 ||
    { echo "sass_diff: compiling $src in $root failed (see $stem.ptxas)" >&2; return 1; }
  "$CUOBJDUMP" -sass "$stem.cubin" >"$stem.sass"
}
export -f build compile_cubin
export CUOBJDUMP
jobs=()
for src in "$@"; do
  [[ -f $src ]] || { echo "sass_diff: no source '$src'" >&2; exit 2; }
  stem=$(basename "$src" .cu)
  jobs+=("$PWD|$src|$dir/new/$stem" "$base_tree|$src|$dir/base/$stem")
done
printf '%s\n' "${jobs[@]}" | xargs -P "${JOBS:-2}" -I{} bash -c 'IFS="|" read -r r s o <<<"{}"; build "$r" "$s" "$o"' ||
  exit 2
status=0
for src in "$@"; do
  stem=$(basename "$src" .cu)
  echo "== $src (working tree vs $rev)"
  python3 scripts/sass_diff.py "$dir/base/$stem" "$dir/new/$stem" "${RENAME:-}" || status=1
done
exit $status
