// Runs the built `qlm logits` and `qlm generate` binaries on a model fixture.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>

#include "cuda/device.h"
#include "io/safetensors.h"
#include "models/model_fixtures.h"
#include "support/temp_dir.h"
#include "support/run_qlm.h"

namespace qlm {
namespace {

using RunResult = testing::QlmRun;
using testing::run_qlm;

namespace fs = std::filesystem;

const fs::path kQlm = fs::path(QLM_BINARY_DIR) / "qlm";

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

TEST(ModelCli, LogitsWritesOneTensorMatchingReference) {
  ASSERT_TRUE(fs::exists(kQlm)) << kQlm;
  testing::TempDir dir;
  const testing::ModelFixture f = testing::load_model_fixture("llama-gqa-gptq");
  for (const char* tp : {"1", "2"}) {
    const fs::path out = dir / (std::string("logits") + tp + ".safetensors");
    const RunResult r = run_qlm("logits '" + f.dir.string() + "' --tokens \"" + join_ids(f.tokens) + "\" --out '" +
                                    out.string() + "' --tp " + tp + " --threads 2",
                                dir);
    ASSERT_EQ(r.status, 0) << r.err;
    const io::SafetensorsFile file = io::SafetensorsFile::open(out);
    ASSERT_EQ(file.tensors().size(), 1u);
    const Tensor logits = file.tensor("logits");
    EXPECT_EQ(logits.dtype(), DType::F32);
    ASSERT_EQ(logits.shape(), f.logits.shape());
    EXPECT_LE(testing::normwise_relative_error(logits, f.logits), f.tolerance);
  }
}

TEST(ModelCli, LogitsRejectsBadTokens) {
  testing::TempDir dir;
  const fs::path model = testing::model_fixture_root() / "llama-gqa";
  RunResult r = run_qlm("logits '" + model.string() + "' --tokens \"1 x 3\" --out '" + (dir / "o.safetensors").string() + "'", dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cli.tokens"), std::string::npos) << r.err;
  r = run_qlm("logits '" + model.string() + "' --tokens \"1 99999\" --out '" + (dir / "o.safetensors").string() + "'", dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("model.token"), std::string::npos) << r.err;
}

TEST(ModelCli, GenerateStreamsTextAndReports) {
  testing::TempDir dir;
  const fs::path model = testing::model_fixture_root() / "llama-gqa-gptq";
  const RunResult r = run_qlm("generate '" + model.string() + "' --prompt 'Hello world' --max-tokens 12 --threads 2", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  for (const char* piece : {"load: ", "prefill: ", "tokens/s", "decode: ", "layers: gptq uint4b8 g32 → cpu_"})
    EXPECT_NE(r.err.find(piece), std::string::npos) << piece << "\n" << r.err;
  // Greedy is deterministic; TP 2 gives the same text.
  const RunResult tp2 =
      run_qlm("generate '" + model.string() + "' --prompt 'Hello world' --max-tokens 12 --threads 2 --tp 2", dir);
  ASSERT_EQ(tp2.status, 0) << tp2.err;
  EXPECT_EQ(tp2.out, r.out);
  // Sampling with a seed is reproducible.
  const std::string sampled = "generate '" + model.string() + "' --prompt 'Hi' --max-tokens 8 --temperature 0.9 "
                              "--top-k 40 --top-p 0.9 --seed 5";
  EXPECT_EQ(run_qlm(sampled, dir).out, run_qlm(sampled, dir).out);
}

TEST(ModelCli, CudaWithoutAGpuIsAClearError) {
  if (!cuda_devices().empty()) GTEST_SKIP() << "a GPU is visible: --device cuda runs";
  testing::TempDir dir;
  const fs::path model = testing::model_fixture_root() / "llama-gqa";
  for (const char* device : {"cuda", "cuda:3"}) {
    const RunResult r = run_qlm("generate '" + model.string() + "' --prompt hi --device " + device, dir);
    EXPECT_EQ(r.status, 1) << device;
    EXPECT_NE(r.err.find("device.unavailable"), std::string::npos) << device << "\n" << r.err;
    EXPECT_NE(r.err.find(cuda_backend_built() ? "CUDA device(s) are visible" : "without the CUDA backend"),
              std::string::npos)
        << device << "\n" << r.err;
  }
}

TEST(ModelCli, DtypeFlag) {
  testing::TempDir dir;
  const fs::path model = testing::model_fixture_root() / "llama-gqa";
  const std::string out = (dir / "o.safetensors").string();
  // bf16 / f16 activations are for CUDA; the CPU computes in f32.
  for (const char* dtype : {"bf16", "f16"}) {
    const RunResult r =
        run_qlm("logits '" + model.string() + "' --tokens \"1 2\" --out '" + out + "' --device cpu --dtype " + dtype, dir);
    EXPECT_EQ(r.status, 1) << dtype;
    EXPECT_NE(r.err.find("model.act_dtype"), std::string::npos) << dtype << "\n" << r.err;
    EXPECT_NE(r.err.find("activations on the CPU are F32"), std::string::npos) << dtype << "\n" << r.err;
  }
  RunResult r = run_qlm("logits '" + model.string() + "' --tokens \"1 2\" --out '" + out + "' --dtype f8", dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cli.dtype"), std::string::npos) << r.err;
  r = run_qlm("logits '" + model.string() + "' --tokens \"1 2\" --out '" + out + "' --dtype f32 --threads 2", dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("cpu, activations F32"), std::string::npos) << r.err;
}

// --cuda-graph takes on or off; on the CPU it changes nothing and no decode step is reported.
TEST(ModelCli, CudaGraphFlag) {
  testing::TempDir dir;
  const fs::path model = testing::model_fixture_root() / "llama-gqa";
  RunResult r = run_qlm("generate '" + model.string() + "' --prompt hi --max-tokens 3 --cuda-graph maybe", dir);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--cuda-graph"), std::string::npos) << r.err;
  for (const char* setting : {"on", "off"}) {
    r = run_qlm("generate '" + model.string() + "' --prompt hi --max-tokens 3 --threads 2 --cuda-graph " + setting, dir);
    EXPECT_EQ(r.status, 0) << setting << "\n" << r.err;
    EXPECT_EQ(r.err.find("decode step:"), std::string::npos) << setting << "\n" << r.err;
  }
}

TEST(ModelCli, CudaTensorParallelIsAClearError) {
  if (!cuda_devices().empty()) {
    // With a GPU the device check passes and a TP size above the GPU count is what is refused.
    testing::TempDir dir;
    const fs::path model = testing::model_fixture_root() / "llama-gqa";
    const std::string tp = std::to_string(cuda_devices().size() + 1);  // one rank more than there are GPUs
    const RunResult r = run_qlm("generate '" + model.string() + "' --prompt hi --device cuda --tp " + tp, dir);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("model.tp"), std::string::npos) << r.err;
    EXPECT_TRUE(r.err.find("GPU per rank") != std::string::npos || r.err.find("needs NCCL") != std::string::npos)
        << r.err;
    return;
  }
  GTEST_SKIP() << "no GPU: the device check comes first";
}

}  // namespace
}  // namespace qlm
