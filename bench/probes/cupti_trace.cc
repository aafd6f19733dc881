// Probe (investigation tool, not part of the library): a CUDA injection library that records every kernel, memcpy
// and memset the process runs on the GPU through CUPTI's activity API — graph nodes included, with their real start
// and end under programmatic dependent launch — and the host's CUDA runtime calls ("[API name]" rows, host time on
// the same clock), and writes them as CSV at exit. For machines without Nsight Systems
// (scripts/probe_decode_trace.sh; summarised by scripts/decode_trace_summary.py, whose columns it writes).
//
// Build: g++ -std=c++17 -O2 -shared -fPIC -I$CUDA/include bench/probes/cupti_trace.cc -L$CUDA/lib -lcupti \
//          -o libqlm_cupti_trace.so
// Use:   CUDA_INJECTION64_PATH=$PWD/libqlm_cupti_trace.so QLM_CUPTI_OUT=trace.csv <program> (libcupti on the
//        library path)
#include <cupti.h>
#include <cxxabi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Row {
  uint64_t start, end;
  int gx, gy, gz;
  std::string name;
};

std::mutex g_mu;
std::vector<Row> g_rows;
constexpr size_t kBufferBytes = 8u << 20;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "cupti_trace: %s: %s\n", what, msg ? msg : "?");
}

std::string demangled(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : name;
  std::free(d);
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::vector<Row> rows;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        rows.push_back({k->start, k->end, k->gridX, k->gridY, k->gridZ, demangled(k->name)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        rows.push_back({m->start, m->end, 0, 0, 0, "[CUDA memcpy kind " + std::to_string(m->copyKind) + "]"});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
        const char* name = nullptr;
        cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name);
        rows.push_back({a->start, a->end, 0, 0, 0, std::string("[API ") + (name ? name : "?") + "]"});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        rows.push_back({m->start, m->end, 0, 0, 0, "[CUDA memset]"});
        break;
      }
      default: break;
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (dropped) std::fprintf(stderr, "cupti_trace: %zu records dropped\n", dropped);
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mu);
  for (Row& r : rows) g_rows.push_back(std::move(r));
}

std::string csv_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void write_at_exit() {
  check(cuptiActivityFlushAll(1), "flush");
  const char* path = std::getenv("QLM_CUPTI_OUT");
  std::FILE* f = std::fopen(path && *path ? path : "cupti_trace.csv", "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cupti_trace: cannot write %s\n", path ? path : "cupti_trace.csv");
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(f, "Start (ns),Duration (ns),GrdX,GrdY,GrdZ,Name\n");
  for (const Row& r : g_rows) {
    if (r.name.front() == '[')
      std::fprintf(f, "%llu,%llu,,,,%s\n", static_cast<unsigned long long>(r.start),
                   static_cast<unsigned long long>(r.end - r.start), csv_quoted(r.name).c_str());
    else
      std::fprintf(f, "%llu,%llu,%d,%d,%d,%s\n", static_cast<unsigned long long>(r.start),
                   static_cast<unsigned long long>(r.end - r.start), r.gx, r.gy, r.gz, csv_quoted(r.name).c_str());
  }
  std::fclose(f);
  std::fprintf(stderr, "cupti_trace: %zu rows\n", g_rows.size());
}

}  // namespace

extern "C" int InitializeInjection(void) {
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register callbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernels");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable memcpy");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable memset");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "enable runtime API");
  std::atexit(write_at_exit);
  return 1;
}
