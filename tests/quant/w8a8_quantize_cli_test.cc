// `qlm quantize` round trip on a tiny Llama fixture: the output is described by `qlm inspect`, and
// `qlm logits` on it equals `qlm logits --quantization <target>` on the float model bit for bit.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/json.h"
#include "io/safetensors.h"
#include "support/temp_dir.h"
#include "support/run_qlm.h"

namespace qlm {
namespace {

using RunResult = testing::QlmRun;
using testing::run_qlm;

namespace fs = std::filesystem;

const fs::path kQlm = fs::path(QLM_BINARY_DIR) / "qlm";
const fs::path kModel = fs::path(QLM_TEST_DATA_DIR) / "models" / "llama-gqa";

std::vector<float> logits_of(const fs::path& file) {
  io::SafetensorsFile f = io::SafetensorsFile::open(file);
  Tensor t = f.tensor("logits");
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(QuantizeCli, RoundTripsThroughInspectAndMatchesOnlineQuantization) {
  ASSERT_TRUE(fs::exists(kQlm)) << kQlm;
  for (const char* target : {"fp8", "fp8_per_channel", "int8"}) {
    testing::TempDir dir;
    const fs::path out = dir / "q";
    RunResult r = run_qlm(fmt::format("quantize '{}' --to {} --out '{}'", kModel.string(), target, out.string()), dir);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("quantized 14 linear weights"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(out / "tokenizer.json"));
    const nlohmann::json cfg = io::read_json_file(out / "config.json");
    EXPECT_EQ(cfg["quantization_config"]["quant_method"], std::string(target) == "fp8" ? "fp8" : "compressed-tensors");

    r = run_qlm(fmt::format("inspect '{}' --json", out.string()), dir);
    ASSERT_EQ(r.status, 0) << r.err << r.out;
    const nlohmann::json report = nlohmann::json::parse(r.out);
    EXPECT_TRUE(report["errors"].empty()) << report["errors"].dump();
    EXPECT_NE(r.out.find(std::string(target) == "int8" ? "I8" : "F8_E4M3"), std::string::npos);

    const std::string tokens = "1 5 9 13 2";
    r = run_qlm(fmt::format("logits '{}' --tokens \"{}\" --out '{}'", out.string(), tokens, (dir / "a.safetensors").string()),
                dir);
    ASSERT_EQ(r.status, 0) << r.err;
    r = run_qlm(fmt::format("logits '{}' --quantization {} --tokens \"{}\" --out '{}'", kModel.string(), target, tokens,
                            (dir / "b.safetensors").string()),
                dir);
    ASSERT_EQ(r.status, 0) << r.err;
    const std::vector<float> a = logits_of(dir / "a.safetensors"), b = logits_of(dir / "b.safetensors");
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << target << " logit " << i;
  }
}

TEST(QuantizeCli, Errors) {
  testing::TempDir dir;
  RunResult r = run_qlm(fmt::format("quantize '{}' --to int4 --out '{}'", kModel.string(), (dir / "x").string()), dir);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("cli.quantize_target"), std::string::npos) << r.err;
  const fs::path gptq = fs::path(QLM_TEST_DATA_DIR) / "models" / "llama-gqa-gptq";
  r = run_qlm(fmt::format("quantize '{}' --to fp8 --out '{}'", gptq.string(), (dir / "y").string()), dir);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("already quantized"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace qlm
