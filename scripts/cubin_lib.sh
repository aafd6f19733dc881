# Sourced by scripts/sass_stats.sh and scripts/sass_diff.sh: compile_cubin SOURCE.cu OUT.cubin [NVCC_ARGS...]
# compiles one CUDA source of the tree it is run in (the current directory) to a cubin for sm_90a (files under
# src/kernels/cuda/sm90a/) or sm_90 (ARCH overrides), and sets CUOBJDUMP to a cuobjdump that can disassemble it
# (fetched by scripts/fetch_cuobjdump.sh where the toolkit has none).
export PATH="$PATH:/usr/local/cuda/bin"
command -v nvcc >/dev/null || { echo "$(basename "$0"): needs nvcc" >&2; exit 1; }
CUOBJDUMP=$(command -v cuobjdump || true)
if [[ -z $CUOBJDUMP ]] || ! command -v nvdisasm >/dev/null; then
  CUOBJDUMP=$("$(dirname "${BASH_SOURCE[0]}")/fetch_cuobjdump.sh")
fi
compile_cubin() {
  local src=$1 out=$2
  shift 2
  local arch=${ARCH:-$([[ $src == *sm90a/* ]] && echo sm_90a || echo sm_90)}
  local flags=(-O3 "-gencode=arch=compute_${arch#sm_},code=$arch" -std=c++17 --expt-relaxed-constexpr
    -DQLM_WITH_CUDA=1 -I. -Isrc -Iinclude)
  [[ $arch == sm_90a ]] && flags+=(-DNDEBUG)
  nvcc "${flags[@]}" "$@" -cubin -o "$out" "$src"
}
