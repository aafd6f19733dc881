// The model fixtures under tests/data/models/: every directory holding a `reference.safetensors`
// (F32 "logits" [T, vocab] from the reference implementation) and an `expected.json` (tokens,
// greedy prompt and ids, TP sizes) is a fixture, whoever wrote it (scripts/make_model_fixtures.py,
// or the real quantization tools).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "core/tensor.h"
#include "io/safetensors.h"

namespace qlm::testing {

struct ModelFixture {
  std::string name;  // directory name
  std::filesystem::path dir;
  std::vector<int32_t> tokens;
  Tensor logits;  // F32 [T, vocab]
  std::vector<int32_t> greedy_prompt, greedy_new;
  std::vector<int> tp_sizes = {1, 2};
  double tolerance = 1e-4;  // normwise relative error of the logits
};

namespace fs = std::filesystem;

// Model fixture directory, sorted fixture names, one fixture; ‖a − b‖₂ / ‖b‖₂ over all elements.
inline fs::path model_fixture_root() { return fs::path(QLM_TEST_DATA_DIR) / "models"; }

inline std::vector<std::string> model_fixture_names() {
  std::vector<std::string> names;
  if (!fs::is_directory(model_fixture_root())) return names;
  for (const auto& entry : fs::directory_iterator(model_fixture_root()))
    if (entry.is_directory() && fs::exists(entry.path() / "reference.safetensors") &&
        fs::exists(entry.path() / "expected.json"))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

inline ModelFixture load_model_fixture(const std::string& name) {
  ModelFixture f;
  f.name = name;
  f.dir = model_fixture_root() / name;
  std::ifstream in(f.dir / "expected.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  f.tokens = expected.at("tokens").get<std::vector<int32_t>>();
  f.greedy_prompt = expected.at("greedy").at("prompt").get<std::vector<int32_t>>();
  f.greedy_new = expected.at("greedy").at("new_tokens").get<std::vector<int32_t>>();
  if (expected.contains("tp")) f.tp_sizes = expected.at("tp").get<std::vector<int>>();
  if (expected.contains("tolerance") && expected["tolerance"].contains("normwise_relative"))
    f.tolerance = expected["tolerance"]["normwise_relative"].get<double>();
  const io::SafetensorsFile ref = io::SafetensorsFile::open(f.dir / "reference.safetensors");
  f.logits = ref.tensor("logits").to(DType::F32);
  if (f.logits.dim() != 2 || f.logits.size(0) != static_cast<int64_t>(f.tokens.size()))
    throw std::runtime_error("fixture " + name + ": logits do not match the tokens");
  return f;
}

inline double normwise_relative_error(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) throw std::runtime_error("normwise_relative_error: shapes differ");
  const std::vector<float> x = a.to_float_vector(), y = b.to_float_vector();
  double diff = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    ref += static_cast<double>(y[i]) * y[i];
  }
  return std::sqrt(diff) / std::sqrt(ref);
}

}  // namespace qlm::testing
