// Tokenizer throughput on the fixture tokenizers (or a real one: QLM_TOKENIZER_DIR=/path/to/model).
// Text: the fixture texts (mostly English fortunes) repeated to about 1 MiB.
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "runtime/tokenizer/tokenizer.h"

namespace {

using qlm::runtime::Tokenizer;

const std::filesystem::path kFixtures = std::filesystem::path(__FILE__).parent_path().parent_path() / "tests/data/tokenizers";

std::filesystem::path tokenizer_path(const std::string& name) {
  if (const char* dir = std::getenv("QLM_TOKENIZER_DIR"); dir != nullptr && name == "env") return dir;
  return kFixtures / name;
}

const std::string& sample_text(bool ascii_only) {
  static std::map<bool, std::string> texts;
  std::string& text = texts[ascii_only];
  if (!text.empty()) return text;
  std::ifstream in(kFixtures / "gpt2/fixtures.json");
  const auto fixtures = nlohmann::json::parse(in);
  std::string one_pass;
  for (const auto& c : fixtures["cases"]) {
    const auto piece = c["text"].get<std::string>();
    bool ascii = true;
    for (const char ch : piece) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
    if (ascii || !ascii_only) one_pass += piece + "\n";
  }
  while (text.size() < (1u << 20)) text += one_pass;
  return text;
}

const Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) slot = Tokenizer::from_model_dir(tokenizer_path(name));
  return *slot;
}

void encode(benchmark::State& state, const std::string& name, bool ascii_only) {
  const Tokenizer& t = tokenizer(name);
  const std::string& text = sample_text(ascii_only);
  size_t tokens = 0;
  for (auto _ : state) {
    const auto ids = t.encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

void decode(benchmark::State& state, const std::string& name) {
  const Tokenizer& t = tokenizer(name);
  const std::string& text = sample_text(false);
  const auto ids = t.encode(text);
  for (auto _ : state) {
    const std::string out = t.decode(ids);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

void load(benchmark::State& state, const std::string& name) {
  for (auto _ : state) benchmark::DoNotOptimize(Tokenizer::from_model_dir(tokenizer_path(name)));
}

int register_all() {
  std::vector<std::string> names = {"gpt2", "llama3", "qwen2", "llama2", "mistral", "spm"};
  if (std::getenv("QLM_TOKENIZER_DIR") != nullptr) names.push_back("env");
  for (const auto& name : names) {
    benchmark::RegisterBenchmark(("encode_ascii/" + name).c_str(), encode, name, true)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("encode_mixed/" + name).c_str(), encode, name, false)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("decode/" + name).c_str(), decode, name)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("load/" + name).c_str(), load, name)->Unit(benchmark::kMillisecond);
  }
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
