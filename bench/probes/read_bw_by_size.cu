// Probe (investigation tool, not part of the library): how close a kernel that only streams bytes (no math) gets to the
// copy floor, per buffer size, when called back to back the way the GPU benchmark calls a layer (copies rotated beyond
// L2, every copy once inside one CUDA graph, replays timed by events). It answers "which share of the floor can a W4A16
// kernel reach on a layer of this many bytes at all" — the fixed costs of a launch, the ramp-up and the tail are in it,
// the math is not.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 bench/probes/read_bw_by_size.cu -o read_bw_by_size
// Usage: read_bw_by_size [--pdl 0|1] [--blocks-per-sm N] [--sizes-mb a,b,...]
// Prints one JSON line per size: bytes, us per call, GB/s, and the share of the copy bandwidth
// measured in the same run (cudaMemcpyAsync device to device, read + write counted).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "read_bw_by_size: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Each thread reads 4 x 16 bytes per step with the streaming (evict-first, no L1) hint, like the
// W4A16 weight loads; the xor keeps the loads from being removed and is written once per block.
template <bool kPdl>
__global__ void __launch_bounds__(256)
    read_kernel(const uint4* __restrict__ src, size_t n_vec, uint32_t* __restrict__ sink) {
  if constexpr (kPdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  uint32_t acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n_vec; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                   : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                   : "l"(src + i + u * stride), "l"(policy));
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n_vec; i += stride) {
    const uint4 v = src[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if constexpr (kPdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;  // practically never: keeps the loads alive
}

std::vector<double> parse_sizes(const char* list) {
  std::vector<double> out;
  std::string s(list);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::atof(s.substr(pos, comma - pos).c_str()));
    pos = comma + 1;
  }
  return out;
}

float time_graph(cudaGraphExec_t exec, cudaStream_t stream, int replays) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  check(cudaGraphLaunch(exec, stream), "warm-up replay");
  std::vector<float> ms(replays);
  for (int r = 0; r < replays; ++r) {
    check(cudaEventRecord(start, stream), "record");
    check(cudaGraphLaunch(exec, stream), "replay");
    check(cudaEventRecord(stop, stream), "record");
    check(cudaEventSynchronize(stop), "sync");
    check(cudaEventElapsedTime(&ms[r], start, stop), "elapsed");
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[replays / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int pdl = 1;
  int blocks_per_sm = 4;
  std::vector<double> sizes_mb = {4, 8, 16, 24, 32, 40, 64, 112, 128, 235};
  for (int a = 1; a + 1 < argc; a += 2) {
    if (!std::strcmp(argv[a], "--pdl"))
      pdl = std::atoi(argv[a + 1]);
    else if (!std::strcmp(argv[a], "--blocks-per-sm"))
      blocks_per_sm = std::atoi(argv[a + 1]);
    else if (!std::strcmp(argv[a], "--sizes-mb"))
      sizes_mb = parse_sizes(argv[a + 1]);
    else {
      std::fprintf(stderr, "read_bw_by_size: unknown option %s\n", argv[a]);
      return 2;
    }
  }
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");

  // Copy bandwidth in the same run: 1 GiB device to device, read + write counted.
  const size_t copy_bytes = size_t(1) << 30;
  void *a = nullptr, *b = nullptr;
  check(cudaMalloc(&a, copy_bytes), "malloc");
  check(cudaMalloc(&b, copy_bytes), "malloc");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  float best_ms = 1e30f;
  for (int r = 0; r < 6; ++r) {
    cudaEventRecord(e0, stream);
    check(cudaMemcpyAsync(b, a, copy_bytes, cudaMemcpyDeviceToDevice, stream), "copy");
    cudaEventRecord(e1, stream);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (r > 0 && ms < best_ms) best_ms = ms;
  }
  const double copy_gbps = 2.0 * copy_bytes / (best_ms * 1e-3) / 1e9;
  cudaFree(b);

  uint32_t* sink = nullptr;
  check(cudaMalloc(&sink, sizeof(uint32_t) * sms * blocks_per_sm), "malloc");
  const size_t pool = copy_bytes;  // copies rotate through 1 GiB: far beyond the 50 MB L2
  for (double mb : sizes_mb) {
    const size_t bytes = (size_t(mb * 1e6) + 15) / 16 * 16;
    const int copies = int(pool / bytes);
    cudaGraph_t graph;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
    for (int c = 0; c < copies; ++c) {
      const uint4* src = reinterpret_cast<const uint4*>(static_cast<char*>(a) + size_t(c) * bytes);
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(sms * blocks_per_sm);
      cfg.blockDim = dim3(256);
      cfg.stream = stream;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = attr;
      cfg.numAttrs = pdl ? 1 : 0;
      if (pdl)
        check(cudaLaunchKernelEx(&cfg, read_kernel<true>, src, bytes / 16, sink), "launch");
      else
        check(cudaLaunchKernelEx(&cfg, read_kernel<false>, src, bytes / 16, sink), "launch");
    }
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    cudaGraphExec_t exec;
    check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    const float ms = time_graph(exec, stream, 10);
    const double us = ms * 1e3 / copies;
    const double gbps = bytes / (us * 1e-6) / 1e9;
    std::printf(
        "{\"probe\":\"read_bandwidth\",\"pdl\":%d,\"blocks_per_sm\":%d,\"mb\":%.1f,\"copies\":%d,"
        "\"us\":%.3f,\"gbps\":%.1f,\"copy_gbps\":%.1f,\"share_of_copy\":%.3f,\"floor_us\":%.3f}\n",
        pdl, blocks_per_sm, bytes / 1e6, copies, us, gbps, copy_gbps, gbps / copy_gbps, bytes / (copy_gbps * 1e3));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaFree(a);
  cudaFree(sink);
  return 0;
}
