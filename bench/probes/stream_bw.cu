// Probe (investigation tool, not part of the library): how fast can one H200 stream a 70b.gate_up-sized
// int4 weight matrix in the cuda_wna16_fast layout (column blocks of 64 columns, 512 bytes per 16-row
// k-tile, contiguous along k), with no math, by each of the data-movement schemes the W4A16 kernels use?
//   ldg        every thread loads 16-byte vectors (ld.global.nc, L1 no-allocate), 8 in flight, grid-stride
//   bulk       a producer warp per block issues cp.async.bulk copies into a ring of stages in shared
//              memory completing on mbarriers; 8 consumer warps read each stage (LDS.128) and release it;
//              persistent grid, stream-K over the stages as the stream kernel does
// Every scheme XORs every 16-byte word it reads; the XORs must agree (so each read everything once).
// Build: nvcc -O3 -std=c++17 -Isrc -gencode=arch=compute_90a,code=sm_90a bench/probes/stream_bw.cu -o stream_bw
// Run:   ./stream_bw    (prints one line per scheme: µs per pass and GB/s)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cuda/bulk_pipeline.cuh"
#include "kernels/cuda/wna16_fast_device.cuh"

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// The kernels' own helpers: evict_first_policy / ld_stream (wna16_fast_device.cuh), the mbarrier and bulk-copy
// wrappers (bulk_pipeline.cuh).
using namespace qlm::cuda;
using namespace qlm::cuda::bulk;

__device__ __forceinline__ uint4 ldg_nc(const uint4* p) {  // ld_stream without the L2 hint
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <bool HINT>
__global__ void __launch_bounds__(256) ldg_kernel(const uint4* __restrict__ src, int64_t n, unsigned* out) {
  constexpr int U = 8;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  uint64_t pol = 0;
  if (HINT) pol = evict_first_policy();
  unsigned acc = 0;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = HINT ? ld_stream(src + i + u * stride, pol) : ldg_nc(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    uint4 v = ldg_nc(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  atomicXor(out, acc);
}

__device__ __forceinline__ void copy_to_stage(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint64_t pol,
                                              bool hint) {
  if (hint)
    bulk_load_hint(dst, src, bytes, bar, pol);
  else
    bulk_load(dst, src, bytes, bar);
}

// Layout: n_blocks column blocks of k_tiles * 512 bytes each. A tile = WN consecutive column blocks; a stage =
// KS k-tiles of each of them (WN copies of KS*512 bytes), or with WN == 1 KS k-tiles of one block.
struct BulkCfg {
  int wn, ks, stages;
  bool hint;
  int consumers;    // warps
  bool extra;       // also 256 bytes of x (a hot 16 KB buffer) and 512 of scales (streamed) per stage
  int groups;       // consumer warp groups taking the stages in turn (1: every warp reads every stage)
  int spin_cycles;  // per stage, after the slot is released: simulated math of the group's warps
};

constexpr int kMaxStagesProbe = 16;

__global__ void bulk_kernel(const unsigned char* __restrict__ src, int64_t n_blocks, int64_t k_tiles, BulkCfg c,
                            const unsigned char* __restrict__ xbuf, const unsigned char* __restrict__ pbuf,
                            unsigned* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[2 * kMaxStagesProbe];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int code_bytes = c.wn * c.ks * 512;
  const int stage_bytes = code_bytes + (c.extra ? 768 : 0);
  const int group_warps = c.consumers / c.groups;
  const int64_t per_tile = k_tiles / c.ks, n_tiles = n_blocks / c.wn;
  const int64_t T = n_tiles * per_tile, G = gridDim.x;
  const int64_t q0 = blockIdx.x * T / G, q1 = (blockIdx.x + 1) * T / G;
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[kMaxStagesProbe]);
  if (tid == 0) {
    for (int i = 0; i < c.stages; ++i) mbar_init(full0 + 8 * i, 1), mbar_init(empty0 + 8 * i, group_warps);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (warp == c.consumers) {
    const uint64_t pol = evict_first_policy();
    int slot = 0;
    uint32_t ph = 0;
    int64_t tile = q0 / per_tile, j = q0 % per_tile;
    for (int64_t q = q0; q < q1; ++q) {
      if (q - q0 >= c.stages) mbar_wait(empty0 + 8 * slot, ph ^ 1u);
      const uint32_t base = smem_addr(smem) + slot * stage_bytes, bar = full0 + 8 * slot;
      if (lane == 0) mbar_expect_tx(bar, stage_bytes);
      __syncwarp();
      if (lane < c.wn)
        copy_to_stage(base + lane * c.ks * 512, src + ((tile * c.wn + lane) * k_tiles + j * c.ks) * 512, c.ks * 512,
                      bar, pol, c.hint);
      if (c.extra && lane == 31) copy_to_stage(base + code_bytes, xbuf + (j % 64) * 256, 256, bar, pol, false);
      if (c.extra && lane == 30) copy_to_stage(base + code_bytes + 256, pbuf + q * 512, 512, bar, pol, false);
      if (++slot == c.stages) slot = 0, ph ^= 1u;
      if (++j == per_tile) j = 0, ++tile;
    }
    return;
  }
  unsigned acc = 0;
  const int group = warp / group_warps, gw = warp % group_warps;
  const int vec = code_bytes / 16, per_warp = vec / group_warps;
  int slot = group % c.stages;
  uint32_t ph = 0;
  for (int64_t q = q0 + group; q < q1; q += c.groups) {
    mbar_wait(full0 + 8 * slot, ph);
    const uint4* s = reinterpret_cast<const uint4*>(smem + slot * stage_bytes) + gw * per_warp;
    for (int i = lane; i < per_warp; i += 32) {
      uint4 v = s[i];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(empty0 + 8 * slot);
    if (c.spin_cycles > 0) {
      const long long t0 = clock64();
      while (clock64() - t0 < c.spin_cycles) {
      }
    }
    slot += c.groups;
    while (slot >= c.stages) slot -= c.stages, ph ^= 1u;
  }
  atomicXor(out, acc);
}

int main() {
  const int64_t n_blocks = 896, k_tiles = 512;  // 70b.gate_up int4: 8192 x 57344
  const int64_t bytes = n_blocks * k_tiles * 512;
  unsigned char* buf;
  unsigned* out;
  CHECK(cudaMalloc(&buf, bytes));
  CHECK(cudaMalloc(&out, sizeof(unsigned)));
  {
    std::vector<uint32_t> h(bytes / 4);
    uint32_t s = 12345;
    for (auto& v : h) s = s * 1664525u + 1013904223u, v = s;
    CHECK(cudaMemcpy(buf, h.data(), bytes, cudaMemcpyHostToDevice));
  }
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  unsigned ref = 0;
  auto run = [&](const char* name, auto launch) {
    const int reps = 20;
    CHECK(cudaMemset(out, 0, 4));
    launch();
    CHECK(cudaDeviceSynchronize());
    unsigned got = 0;
    CHECK(cudaMemcpy(&got, out, 4, cudaMemcpyDeviceToHost));
    CHECK(cudaEventRecord(e0));
    for (int r = 0; r < reps; ++r) launch();
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const double us = 1e3 * ms / reps;
    if (ref == 0) ref = got;
    std::printf("%-40s %8.1f us  %7.0f GB/s  %s\n", name, us, bytes / us * 1e-3,
                got == ref ? "xor ok" : "XOR MISMATCH");
  };
  const int64_t n16 = bytes / 16;
  for (int bps : {4, 8, 16})
    run(bps == 4   ? "ldg 4 blocks/SM x256"
        : bps == 8 ? "ldg 8 blocks/SM x256"
                   : "ldg 16 blocks/SM x256",
        [&] { ldg_kernel<false><<<sms * bps, 256>>>(reinterpret_cast<const uint4*>(buf), n16, out); });
  run("ldg 8 blocks/SM evict_first",
      [&] { ldg_kernel<true><<<sms * 8, 256>>>(reinterpret_cast<const uint4*>(buf), n16, out); });
  unsigned char *xbuf, *pbuf;
  CHECK(cudaMalloc(&xbuf, 64 * 256));
  CHECK(cudaMalloc(&pbuf, n_blocks / 4 * (k_tiles / 8) * 512));
  CHECK(cudaMemset(xbuf, 0, 64 * 256));
  CHECK(cudaMemset(pbuf, 0, n_blocks / 4 * (k_tiles / 8) * 512));
  // {wn, ks, stages, hint, consumer warps, extra copies, groups, spin cycles}, blocks per SM
  struct V {
    const char* name;
    BulkCfg c;
    int bps;
  } vs[] = {
      {"bulk 4x4KB ring12 hint (stream kernel)", {4, 8, 12, true, 8, false, 1, 0}, 1},
      {"bulk 4x4KB ring12 no hint", {4, 8, 12, false, 8, false, 1, 0}, 1},
      {"bulk 4x4KB ring6 hint 2 blocks/SM", {4, 8, 6, true, 8, false, 1, 0}, 2},
      {"bulk 1x16KB ring12 hint", {1, 32, 12, true, 8, false, 1, 0}, 1},
      {"bulk 4x8KB ring6 hint", {4, 16, 6, true, 8, false, 1, 0}, 1},
      {"bulk 4x2KB ring16 hint", {4, 4, 16, true, 8, false, 1, 0}, 1},
      {"bulk 4x4KB ring4 hint 3 blocks/SM", {4, 8, 4, true, 8, false, 1, 0}, 3},
      {"+ x and scale copies", {4, 8, 12, true, 8, true, 1, 0}, 1},
      {"12 warps in 3 groups", {4, 8, 12, true, 12, false, 3, 0}, 1},
      {"12 warps, 3 groups, math 1500 cycles", {4, 8, 12, true, 12, false, 3, 1500}, 1},
      {"12 warps, 3 groups, math 2300 cycles", {4, 8, 12, true, 12, false, 3, 2300}, 1},
      {"12 warps, 3 groups, math 3000 cycles", {4, 8, 12, true, 12, false, 3, 3000}, 1},
      {"+ copies, 3 groups, math 2300 (kernel)", {4, 8, 12, true, 12, true, 3, 2300}, 1},
      {"+ copies, 3 groups, math 1500", {4, 8, 12, true, 12, true, 3, 1500}, 1},
      {"16 warps in 4 groups, math 2300", {4, 8, 12, true, 16, false, 4, 2300}, 1},
  };
  for (const V& v : vs) {
    const int smem = (v.c.wn * v.c.ks * 512 + (v.c.extra ? 768 : 0)) * v.c.stages;
    CHECK(cudaFuncSetAttribute(bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    run(v.name, [&] {
      bulk_kernel<<<sms * v.bps, (v.c.consumers + 1) * 32, smem>>>(buf, n_blocks, k_tiles, v.c, xbuf, pbuf, out);
    });
  }
  CHECK(cudaGetLastError());
  return 0;
}
