// Online quantization (`--quantization fp8 | fp8_per_channel | int8` on a float checkpoint) equals
// offline quantization (quantize_tensors, what `qlm quantize` writes) loaded through the standard
// formats: bit-identical layer outputs. Layers are finalized as soon as their last tensor arrives.
#include <gtest/gtest.h>

#include "loader/loader.h"
#include "quant/online/offline_quantize.h"
#include "quant/w8a8_method.h"
#include "quant/w8a8_test_util.h"
#include "support/expect_error.h"
#include "support/tiny_llama.h"

namespace qlm::testing {
namespace {

std::unique_ptr<QuantizationConfig> config_from(const nlohmann::json& j) {
  auto doc = std::make_shared<const nlohmann::json>(j);
  return resolve_quantization_config(io::JsonView(doc, "config.json", "quantization_config"), std::nullopt);
}

std::map<std::string, std::vector<float>> forward_all(ModuleSet& m, const std::vector<float>& x_hidden,
                                                      const std::vector<float>& x_inter, int64_t M,
                                                      const TinyLlamaSizes& s) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, layer] : m.linears()) {
    const int64_t K = layer->input_size_per_partition();
    const std::vector<float>& x = K == s.hidden ? x_hidden : x_inter;
    std::vector<float> xin(x.begin(), x.begin() + M * K);
    Tensor y = layer->forward(Tensor::from_vector(xin, {M, K}));
    out[name] = std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
  }
  return out;
}

TEST(OnlineQuant, EqualsOfflineQuantizationBitForBit) {
  TinyLlamaSizes s;
  s.qkv_bias = true;
  for (DType dtype : {DType::F32, DType::BF16})
    for (const char* target : {"fp8", "fp8_per_channel", "int8"}) {
      const NamedTensors tensors = tiny_block_tensors(s, dtype, 42);
      const std::vector<float> xh = random_inputs(4, s.hidden, 1), xi = random_inputs(4, s.intermediate, 2);

      auto online = resolve_quantization_config(std::nullopt, std::string(target));
      ModuleSet on;
      add_tiny_block(on, s, online.get(), {}, {}, dtype);
      bool gate_up_early = false;
      load_tensors(tensors, on, [&](const LoadProgress& p) {
        if (p.tensor == "model.layers.0.mlp.up_proj.weight")
          gate_up_early = on.linear("model.layers.0.mlp.gate_up_proj").finalized() &&
                          !on.linear("model.layers.0.self_attn.qkv_proj").finalized();
      });
      EXPECT_TRUE(gate_up_early) << target << ": online layers are quantized as soon as they are complete";

      QuantizeResult r = quantize_tensors(tensors, parse_quantize_target(target));
      EXPECT_EQ(r.quantized, 7u);
      auto offline = config_from(r.quantization_config);
      ModuleSet off;
      add_tiny_block(off, s, offline.get(), {}, {}, dtype);
      load_tensors(r.tensors, off);

      auto a = forward_all(on, xh, xi, 4, s), b = forward_all(off, xh, xi, 4, s);
      for (const auto& [name, y] : a) {
        ASSERT_EQ(y.size(), b[name].size());
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_EQ(y[i], b[name][i]) << target << " " << dtype_name(dtype) << " " << name << " [" << i << "]";
      }
      // And both are close to the float layer.
      for (const auto& [name, y] : a) {
        const std::string module = name;
        if (module.find("qkv") != std::string::npos || module.find("gate_up") != std::string::npos) continue;
        const int64_t K = on.linear(name).input_size_per_partition();
        const std::vector<float>& x = K == s.hidden ? xh : xi;
        const std::vector<double> ref = dense_reference(tensors, name, std::vector<float>(x.begin(), x.begin() + 4 * K), 4);
        EXPECT_LE(rel_mean_error(y, ref), std::string(target) == "int8" ? 2e-2 : 6e-2) << target << " " << name;
      }
    }
}

TEST(OnlineQuant, ResolvesOnlyForFloatCheckpoints) {
  EXPECT_NE(resolve_quantization_config(std::nullopt, std::string("fp8"))->describe().find("online"), std::string::npos);
  EXPECT_QLM_ERROR(make_quant_config(R"({"quant_method": "int8"})"), "config.value", "online method");
  // An fp8 checkpoint accepts --quantization fp8 (same family) but not the online-only methods.
  auto doc = std::make_shared<const nlohmann::json>(
      nlohmann::json{{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}});
  io::JsonView view(doc, "config.json", "quantization_config");
  EXPECT_EQ(resolve_quantization_config(view, std::string("fp8"))->describe(), "fp8 per-tensor dynamic");
  EXPECT_QLM_ERROR(resolve_quantization_config(view, std::string("int8")), "config.override_family", "int8");
  EXPECT_QLM_ERROR(parse_quantize_target("int4"), "cli.quantize_target", "int4");
}

TEST(OnlineQuant, RejectsIntegerCheckpointWeights) {
  auto online = resolve_quantization_config(std::nullopt, std::string("int8"));
  ModuleSet m;
  TinyLlamaSizes s;
  EXPECT_QLM_ERROR(add_tiny_block(m, s, online.get(), {}, {}, DType::I8), "layer.dtype", "online");
}

}  // namespace
}  // namespace qlm::testing
