// Checkpoint::open (headers only) on a synthetic 1,000-tensor ~10 GB checkpoint that is sparse on
// disk, and verify_checkpoint_data (every byte, checksummed) on a real 1 GiB file against
// `cat FILE > /dev/null` on the same file, each with a warm and a cold page cache.
// Disk use: the 1 GiB real file only; everything lives in one temp dir removed at exit.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/verify.h"

namespace {

namespace fs = std::filesystem;
using qlm::io::Checkpoint;

constexpr int kSparseTensors = 1000;
constexpr int64_t kSparseRows = 2560, kSparseCols = 2048;  // BF16: 10 MiB per tensor, ~10.5 GB in all
constexpr int kRealTensors = 64;
constexpr int64_t kRealTensorBytes = int64_t{16} << 20;  // U8: 64 x 16 MiB = 1 GiB

fs::path g_root;

std::string le_u64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return out;
}

// Writes length + padded header for `count` tensors of `shape` and `dtype` named
// "<prefix>.<i>.weight"; returns the byte offset where the data buffer starts.
uint64_t write_header(std::ofstream& out, const std::string& prefix, int count, const std::string& dtype,
                      const std::vector<int64_t>& shape, uint64_t tensor_bytes) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  for (int i = 0; i < count; ++i) {
    const uint64_t begin = static_cast<uint64_t>(i) * tensor_bytes;
    header[fmt::format("{}.{}.weight", prefix, i)] = {
        {"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, begin + tensor_bytes}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  out << le_u64(text.size()) << text;
  return 8 + text.size();
}

// A sparse file: header written, then extended to its final size without writing data.
void write_sparse_shard(const fs::path& path, const std::string& prefix, int count) {
  const uint64_t tensor_bytes = static_cast<uint64_t>(kSparseRows * kSparseCols * 2);
  uint64_t data_start;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    data_start = write_header(out, prefix, count, "BF16", {kSparseRows, kSparseCols}, tensor_bytes);
  }
  fs::resize_file(path, data_start + tensor_bytes * static_cast<uint64_t>(count));
}

void write_real_file(const fs::path& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  write_header(out, "real", kRealTensors, "U8", {kRealTensorBytes}, static_cast<uint64_t>(kRealTensorBytes));
  std::vector<uint64_t> chunk(static_cast<size_t>(kRealTensorBytes) / 8);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int t = 0; t < kRealTensors; ++t) {
    for (auto& word : chunk) {  // xorshift: incompressible, cheap to generate
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      word = state;
    }
    out.write(reinterpret_cast<const char*>(chunk.data()), kRealTensorBytes);
  }
}

void setup_files() {
  g_root = fs::temp_directory_path() / fmt::format("qlm-checkpoint-bench-{}", ::getpid());
  fs::create_directories(g_root / "sparse");
  fs::create_directories(g_root / "sharded");
  fs::create_directories(g_root / "real");
  write_sparse_shard(g_root / "sparse" / "model.safetensors", "model.layers", kSparseTensors);

  // The same 1,000 tensors as 10 shards with an index.
  nlohmann::json weight_map = nlohmann::json::object();
  constexpr int kShards = 10;
  for (int s = 0; s < kShards; ++s) {
    const std::string shard = fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, kShards);
    const std::string prefix = fmt::format("model.shard{}", s);
    write_sparse_shard(g_root / "sharded" / shard, prefix, kSparseTensors / kShards);
    for (int i = 0; i < kSparseTensors / kShards; ++i) weight_map[fmt::format("{}.{}.weight", prefix, i)] = shard;
  }
  std::ofstream(g_root / "sharded" / "model.safetensors.index.json")
      << nlohmann::json{{"metadata", {{"total_size", uint64_t{kSparseTensors} * kSparseRows * kSparseCols * 2}}},
                        {"weight_map", weight_map}}
             .dump();
  write_real_file(g_root / "real" / "model.safetensors");
}

fs::path real_file() { return g_root / "real" / "model.safetensors"; }

// Evicts the file from the page cache (clean pages; no root needed).
void drop_from_page_cache(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void BM_OpenSparse1000Tensors(benchmark::State& state) {
  size_t tensors = 0;
  for (auto _ : state) {
    Checkpoint checkpoint = Checkpoint::open(g_root / "sparse");
    tensors = checkpoint.tensor_count();
    benchmark::DoNotOptimize(tensors);
  }
  state.counters["tensors"] = static_cast<double>(tensors);
  state.counters["described_GB"] = static_cast<double>(fs::file_size(g_root / "sparse" / "model.safetensors")) / 1e9;
}
BENCHMARK(BM_OpenSparse1000Tensors)->Unit(benchmark::kMillisecond);

void BM_OpenSharded10x100Tensors(benchmark::State& state) {
  size_t tensors = 0;
  for (auto _ : state) {
    Checkpoint checkpoint = Checkpoint::open(g_root / "sharded");
    tensors = checkpoint.tensor_count();
    benchmark::DoNotOptimize(tensors);
  }
  state.counters["tensors"] = static_cast<double>(tensors);
}
BENCHMARK(BM_OpenSharded10x100Tensors)->Unit(benchmark::kMillisecond);

// Arg 0: warm page cache; 1: cold (file evicted before each iteration).
void BM_VerifyData1GiB(benchmark::State& state) {
  const bool cold = state.range(0) == 1;
  double gbps = 0;
  for (auto _ : state) {
    if (cold) drop_from_page_cache(real_file());
    Checkpoint checkpoint = Checkpoint::open(g_root / "real");
    qlm::io::VerifyReport report = qlm::io::verify_checkpoint_data(checkpoint);
    state.SetIterationTime(report.seconds);
    gbps = report.gigabytes_per_second;
    benchmark::DoNotOptimize(report.files[0].checksum);
  }
  state.counters["GB/s"] = gbps;
  state.SetBytesProcessed(state.iterations() * kRealTensors * kRealTensorBytes);
}
BENCHMARK(BM_VerifyData1GiB)->Arg(0)->Arg(1)->ArgName("cold")->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_Cat1GiB(benchmark::State& state) {
  const bool cold = state.range(0) == 1;
  const std::string command = fmt::format("cat '{}' > /dev/null", real_file().string());
  for (auto _ : state) {
    if (cold) drop_from_page_cache(real_file());
    const auto start = std::chrono::steady_clock::now();
    if (std::system(command.c_str()) != 0) state.SkipWithError("cat failed");
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double bytes = static_cast<double>(fs::file_size(real_file()));
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9 * static_cast<double>(state.iterations()),
                                              benchmark::Counter::kIsRate);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Cat1GiB)->Arg(0)->Arg(1)->ArgName("cold")->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  setup_files();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ignored;
  fs::remove_all(g_root, ignored);
  return 0;
}
