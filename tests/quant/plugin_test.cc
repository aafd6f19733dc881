// The example plugin (examples/my_quant) through the whole public pipeline: load the .so,
// config.json with quant_method "my_quant" -> resolve -> layers at TP 1 and 2 -> safetensors
// checkpoint -> load -> forward, equal to a float64 reference.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/checkpoint.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "loader/loader.h"
#include "quant/quantization_config.h"
#include "support/expect_error.h"
#include "support/quantize_ref.h"
#include "support/run_qlm.h"
#include "support/temp_dir.h"
#include "support/tiny_llama.h"

namespace qlm {
namespace {

using testing::NamedTensors;

// One projection in my_quant form, and its exact dequantized weight for the reference.
void add_projection(NamedTensors& ckpt, NamedTensors& ref, const std::string& module, int64_t N, int64_t K,
                    uint64_t seed) {
  std::vector<float> r = testing::random_weights(N, K, seed);
  std::vector<int8_t> q(r.size());
  for (size_t i = 0; i < r.size(); ++i) q[i] = static_cast<int8_t>(std::lround(std::clamp(r[i] * 40.0f, -127.0f, 127.0f)));
  std::vector<float> s(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) s[static_cast<size_t>(n)] = 0.001f * static_cast<float>(1 + (n * 7 + seed) % 13);
  Tensor scale = Tensor::from_vector(s, {N}).to(DType::F16);  // stored f16, widened exactly on load
  const std::vector<float> s16 = scale.to_float_vector();
  std::vector<double> w(r.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      w[static_cast<size_t>(n * K + k)] = q[static_cast<size_t>(n * K + k)] * static_cast<double>(s16[static_cast<size_t>(n)]);
  ckpt.emplace_back(module + ".weight_int8", Tensor::from_vector(q, {N, K}));
  ckpt.emplace_back(module + ".weight_scale", scale);
  ref.emplace_back(module + ".weight", Tensor::from_vector(w, {N, K}));
}

TEST(QuantPlugin, MyQuantEndToEndAtTp1And2) {
  load_quant_plugin(QLM_MY_QUANT_PLUGIN);
  load_quant_plugin(QLM_MY_QUANT_PLUGIN);  // a second load is a no-op
  ASSERT_NE(QuantRegistry::instance().find("my-quant"), nullptr);

  testing::TempDir dir;
  {
    std::ofstream(dir / "config.json")
        << R"({"architectures": ["LlamaForCausalLM"], "quantization_config": {"quant_method": "my_quant"}})";
  }
  io::JsonView hf = io::JsonView::from_file(dir / "config.json");
  std::unique_ptr<QuantizationConfig> config = resolve_quantization_config(hf.get_object("quantization_config"), std::nullopt);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->name(), "my_quant");
  EXPECT_QLM_ERROR(resolve_quantization_config(hf.get_object("quantization_config"), std::string("unquantized_x")),
                   "config.unknown_method", "my_quant");

  const testing::TinyLlamaSizes s{};
  const std::string a = "model.layers.0.self_attn.", m = "model.layers.0.mlp.";
  NamedTensors ckpt, ref;
  add_projection(ckpt, ref, a + "q_proj", s.heads * s.head_dim, s.hidden, 1);
  add_projection(ckpt, ref, a + "k_proj", s.kv_heads * s.head_dim, s.hidden, 2);
  add_projection(ckpt, ref, a + "v_proj", s.kv_heads * s.head_dim, s.hidden, 3);
  add_projection(ckpt, ref, a + "o_proj", s.hidden, s.heads * s.head_dim, 4);
  add_projection(ckpt, ref, m + "gate_proj", s.intermediate, s.hidden, 5);
  add_projection(ckpt, ref, m + "up_proj", s.intermediate, s.hidden, 6);
  add_projection(ckpt, ref, m + "down_proj", s.hidden, s.intermediate, 7);
  io::write_safetensors(dir / "model.safetensors", ckpt);
  io::Checkpoint checkpoint = io::Checkpoint::open(dir.path());

  const int64_t M = 3;
  const std::vector<float> x = testing::random_inputs(M, s.hidden, 9);
  const std::vector<float> xd = testing::random_inputs(M, s.intermediate, 10);
  const auto ref_q = testing::dense_reference(ref, a + "q_proj", x, M);
  const auto ref_down = testing::dense_reference(ref, m + "down_proj", xd, M);
  for (int tp : {1, 2}) {
    LocalCommGroup group(tp);
    std::vector<Tensor> qkv(static_cast<size_t>(tp)), down(static_cast<size_t>(tp));
    run_on_ranks(tp, [&](int r) {
      ModuleSet modules;
      testing::add_tiny_block(modules, s, config.get(), QuantContext{}, group.context(r), DType::F16);
      EXPECT_EQ(modules.linear(m + "down_proj").method().name(), "my_quant");
      LoadReport report = load_checkpoint(checkpoint, modules);
      EXPECT_EQ(report.tensors_loaded, ckpt.size());
      qkv[static_cast<size_t>(r)] = modules.linear(a + "qkv_proj").forward(Tensor::from_vector(x, {M, s.hidden}));
      const int64_t K_p = s.intermediate / tp;
      std::vector<float> xs;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K_p; ++k) xs.push_back(xd[static_cast<size_t>(i * s.intermediate + r * K_p + k)]);
      down[static_cast<size_t>(r)] = modules.linear(m + "down_proj").forward(Tensor::from_vector(xs, {M, K_p}));
    });
    const int64_t nq = s.heads * s.head_dim / tp;
    for (int r = 0; r < tp; ++r) {
      for (int64_t i = 0; i < M; ++i)
        for (int64_t c = 0; c < nq; ++c) {
          int64_t idx[2] = {i, c};
          const double want = ref_q[static_cast<size_t>(i * s.heads * s.head_dim + r * nq + c)];
          EXPECT_NEAR(qkv[static_cast<size_t>(r)].item_as_double(idx), want, 1e-5 * (1 + std::abs(want)));
        }
      const auto y = down[static_cast<size_t>(r)].to_float_vector();
      for (size_t g = 0; g < ref_down.size(); ++g) EXPECT_NEAR(y[g], ref_down[g], 1e-5 * (1 + std::abs(ref_down[g])));
    }
  }
}

// QLM_QUANT_PLUGINS is read once per process, and other tests in the same process may have read it already (or loaded
// the plugin themselves), so the check runs in a fresh child of this binary: nothing registers my_quant there before
// load_plugins_from_env() reads the list (empty entries between the separators are skipped).
TEST(QuantPluginChild, RegistersWhatTheEnvironmentLists) {
  if (std::getenv("QLM_TEST_PLUGIN_ENV_CHILD") == nullptr)
    GTEST_SKIP() << "runs only as the child of QuantPlugin.LoadsPluginsListedInTheEnvironment";
  ASSERT_EQ(QuantRegistry::instance().find("my_quant"), nullptr) << "registered before the list was read";
  load_plugins_from_env();
  EXPECT_NE(QuantRegistry::instance().find("my_quant"), nullptr);
}

TEST(QuantPlugin, LoadsPluginsListedInTheEnvironment) {
  testing::TempDir dir;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const testing::QlmRun child = testing::run_command(
      fmt::format("env -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX QLM_TEST_PLUGIN_ENV_CHILD=1 QLM_QUANT_PLUGINS=':{}:' "
                  "'{}' --gtest_filter=QuantPluginChild.RegistersWhatTheEnvironmentLists",
                  QLM_MY_QUANT_PLUGIN, self),
      dir);
  EXPECT_EQ(child.status, 0) << child.out << child.err;
  EXPECT_NE(child.out.find("[  PASSED  ] 1 test"), std::string::npos) << "the child did not run its test:\n"
                                                                      << child.out << child.err;
}

}  // namespace
}  // namespace qlm
