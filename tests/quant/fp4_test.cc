// Float4 (e2m1) weight-only layers, compressed-tensors NVFP4A16 and MXFP4A16 (quant/fp4_method.h): the code
// conversions over every value, layers against a float64 reference built from this file's own quantizer at TP 1
// and 2 (fused parts with different global scales, odd N and M), every backend that implements them, and the bad
// inputs (scales, shapes, partitions, schemes) each with its error. The real tool's output is checked by the model
// fixtures *-ct-nvfp4a16 / *-ct-mxfp4a16 (tests/data/models/README.md).
#include <gtest/gtest.h>

#include <cmath>

#include "quant/compressed_tensors/ct_config.h"
#include "quant/fp4_method.h"
#include "quant/w8a8_test_util.h"
#include "support/expect_error.h"

namespace qlm::testing {
namespace {

// e2m1 from its bit fields (sign, 2 exponent bits with bias 1, 1 mantissa bit; exponent 0 is subnormal).
double e2m1_from_fields(int nibble) {
  const int e = (nibble >> 1) & 3, m = nibble & 1;
  const double mag = e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, e - 1);
  return (nibble & 8) ? -mag : mag;
}

TEST(Fp4Codes, EveryE2m1NibbleDecodesAndConvertsToE4m3Exactly) {
  for (int n = 0; n < 16; ++n) {
    const auto nib = static_cast<uint8_t>(n);
    const float want = static_cast<float>(e2m1_from_fields(n));
    EXPECT_EQ(f32_bits(e2m1_to_f32(nib)), f32_bits(want)) << "nibble " << n;  // -0 keeps its sign
    EXPECT_EQ(f32_bits(e4m3_to_f32(e2m1_to_e4m3(nib))), f32_bits(want)) << "nibble " << n;
  }
}

TEST(Fp4Codes, EveryE8m0CodeDecodes) {
  for (int e = 0; e < 255; ++e) {
    const float v = e8m0_to_f32(static_cast<uint8_t>(e));
    EXPECT_EQ(v, std::ldexp(1.0f, e - 127)) << "e8m0 " << e;
    EXPECT_FALSE(e8m0_is_nan(static_cast<uint8_t>(e)));
  }
  EXPECT_TRUE(std::isnan(e8m0_to_f32(255)));
  EXPECT_TRUE(e8m0_is_nan(255));
}

TEST(Fp4Codes, PackedBytesBecomeE4m3PairsLowNibbleFirst) {
  // Every byte value once, in an odd-shaped [5, 52] view of 260 bytes (the first 256 are 0..255).
  Tensor packed = Tensor::empty({5, 52}, DType::U8);
  for (int i = 0; i < 260; ++i) packed.data<uint8_t>()[i] = static_cast<uint8_t>(i * 1 % 256);
  const Tensor codes = fp4_packed_to_e4m3(packed);
  ASSERT_EQ(codes.shape(), Shape({5, 104}));
  ASSERT_EQ(codes.dtype(), DType::F8_E4M3);
  for (int i = 0; i < 260; ++i) {
    const int b = i % 256;
    EXPECT_EQ(f32_bits(e4m3_to_f32(codes.data<uint8_t>()[2 * i])), f32_bits(float(e2m1_from_fields(b & 15))));
    EXPECT_EQ(f32_bits(e4m3_to_f32(codes.data<uint8_t>()[2 * i + 1])), f32_bits(float(e2m1_from_fields(b >> 4))));
  }
}

// ---- this test's own quantizers (round to the nearest e2m1 magnitude, ties to the smaller) ----

uint8_t nearest_e2m1(double v) {
  constexpr double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  int best = 0;
  for (int i = 1; i < 8; ++i)
    if (std::fabs(std::fabs(v) - kMag[i]) < std::fabs(std::fabs(v) - kMag[best])) best = i;
  return static_cast<uint8_t>(best | (v < 0 ? 8 : 0));
}

struct Fp4Part {
  CheckpointTensors tensors;
  std::vector<double> deq;  // [N, K]
};

Tensor pack_nibbles(const std::vector<uint8_t>& codes, int64_t N, int64_t K) {
  Tensor t = Tensor::empty({N, K / 2}, DType::U8);
  for (int64_t i = 0; i < N * K / 2; ++i)
    t.data<uint8_t>()[i] = static_cast<uint8_t>(codes[2 * i] | (codes[2 * i + 1] << 4));
  return t;
}

// NVFP4 as llm-compressor does it: global = 448 * 6 / amax(w) (times `global_factor`, so parts differ); each
// group of 16's scale e4m3(group amax / 6 * global); codes nearest to w / (scale / global).
Fp4Part nvfp4_part(const std::vector<float>& w, int64_t N, int64_t K, float global_factor = 1.0f) {
  Fp4Part p{.tensors = {}, .deq = std::vector<double>(static_cast<size_t>(N * K))};
  float amax = 0;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  const float global = 448.0f * 6.0f / amax * global_factor;
  const int64_t G = K / 16;
  Tensor scale = Tensor::empty({N, G}, DType::F8_E4M3);
  std::vector<uint8_t> codes(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      float gmax = 0;
      for (int64_t k = g * 16; k < g * 16 + 16; ++k) gmax = std::max(gmax, std::fabs(w[n * K + k]));
      const uint8_t s = f32_to_e4m3(gmax / 6.0f * global);
      scale.data<uint8_t>()[n * G + g] = s;
      const double mult = double(e4m3_to_f32(s)) / double(global);
      for (int64_t k = g * 16; k < g * 16 + 16; ++k) {
        const uint8_t c = mult > 0 ? nearest_e2m1(w[n * K + k] / mult) : 0;
        codes[n * K + k] = c;
        p.deq[n * K + k] = e2m1_from_fields(c) * mult;
      }
    }
  p.tensors["weight_packed"] = pack_nibbles(codes, N, K);
  p.tensors["weight_scale"] = scale;
  p.tensors["weight_global_scale"] = Tensor::from_vector(std::vector<float>{global}, {1});
  return p;
}

// MXFP4 (OCP MX): the group of 32's shared exponent floor(log2(group amax)) - 2, codes nearest to w / 2^e.
Fp4Part mxfp4_part(const std::vector<float>& w, int64_t N, int64_t K) {
  Fp4Part p{.tensors = {}, .deq = std::vector<double>(static_cast<size_t>(N * K))};
  const int64_t G = K / 32;
  Tensor scale = Tensor::empty({N, G}, DType::U8);
  std::vector<uint8_t> codes(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      float gmax = 0;
      for (int64_t k = g * 32; k < g * 32 + 32; ++k) gmax = std::max(gmax, std::fabs(w[n * K + k]));
      const int e = static_cast<int>(std::floor(std::log2(std::max(gmax, 1e-30f)))) - 2;
      scale.data<uint8_t>()[n * G + g] = static_cast<uint8_t>(e + 127);
      const double mult = std::ldexp(1.0, e);
      for (int64_t k = g * 32; k < g * 32 + 32; ++k) {
        const uint8_t c = nearest_e2m1(w[n * K + k] / mult);
        codes[n * K + k] = c;
        p.deq[n * K + k] = e2m1_from_fields(c) * mult;
      }
    }
  p.tensors["weight_packed"] = pack_nibbles(codes, N, K);
  p.tensors["weight_scale"] = scale;
  return p;
}

const char* kNvfp4 =
    R"({"num_bits": 4, "type": "float", "symmetric": true, "strategy": "tensor_group", "group_size": 16,
        "dynamic": false, "scale_dtype": "torch.float8_e4m3fn", "zp_dtype": null, "observer": "memoryless_minmax"})";
const char* kMxfp4 = R"({"num_bits": 4, "type": "float", "symmetric": true, "strategy": "group", "group_size": 32,
        "dynamic": false, "scale_dtype": "torch.uint8", "zp_dtype": "torch.uint8"})";

std::string ct_fp4_json(const std::string& format, const std::string& weights, const std::string& inputs = "") {
  return fmt::format(R"({{"quant_method": "compressed-tensors", "format": "{}", "ignore": ["lm_head"],
      "config_groups": {{"group_0": {{"targets": ["Linear"], "weights": {}{}}}}}}})",
                     format, weights, inputs.empty() ? "" : ", \"input_activations\": " + inputs);
}

// Every backend that takes the scheme on the CPU, TP 1 and 2: weight-only, so only the f32 accumulation (and one
// float32 rounding of scale / global) separates the layer from the float64 reference.
void expect_matches(const QuantizationConfig* cfg, const LinearSpec& spec, const PartTensors& parts,
                    const std::vector<const std::vector<double>*>& deq, const std::vector<int64_t>& rows, int64_t M) {
  const std::vector<float> x = random_inputs(M, spec.input_size, 17);
  const auto ref = ref_output(ref_acts(x, M, spec.input_size, RefAct::None), M, spec.input_size, deq, rows);
  for (const char* backend : {"auto", "cpu_ref", "cpu_fast"}) {
    LayerFixture f{.config = cfg, .spec = spec, .backend = backend};
    for (int tp : {1, 2})
      EXPECT_LE(rel_mean_error(run_layer_tp(f, parts, x, M, tp), ref), 2e-6) << backend << " tp=" << tp;
  }
}

TEST(Fp4Layer, Nvfp4FusedPartsWithDifferentGlobalScales) {
  auto cfg = make_quant_config(ct_fp4_json("nvfp4-pack-quantized", kNvfp4));
  constexpr int64_t K = 96;
  const Fp4Part g = nvfp4_part(random_nk(38, K, 1), 38, K, 1.0f);
  const Fp4Part u = nvfp4_part(random_nk(54, K, 2, 3.0f), 54, K, 0.37f);
  expect_matches(cfg.get(), gate_up_spec(K, 38, 54), {g.tensors, u.tensors}, {&g.deq, &u.deq}, {38, 54}, 7);
}

TEST(Fp4Layer, Nvfp4RowParallel) {
  auto cfg = make_quant_config(ct_fp4_json("nvfp4-pack-quantized", kNvfp4));
  constexpr int64_t K = 160, N = 37;
  const Fp4Part d = nvfp4_part(random_nk(N, K, 3), N, K);
  expect_matches(cfg.get(), down_spec(K, N), {d.tensors}, {&d.deq}, {N}, 5);
}

TEST(Fp4Layer, Mxfp4FusedAndRowParallel) {
  auto cfg = make_quant_config(ct_fp4_json("mxfp4-pack-quantized", kMxfp4));
  constexpr int64_t K = 128;
  const Fp4Part g = mxfp4_part(random_nk(30, K, 4, 0.01f), 30, K);
  const Fp4Part u = mxfp4_part(random_nk(42, K, 5, 40.0f), 42, K);
  expect_matches(cfg.get(), gate_up_spec(K, 30, 42), {g.tensors, u.tensors}, {&g.deq, &u.deq}, {30, 42}, 9);
  const Fp4Part d = mxfp4_part(random_nk(33, K, 6), 33, K);
  expect_matches(cfg.get(), down_spec(K, 33), {d.tensors}, {&d.deq}, {33}, 1);
}

TEST(Fp4Layer, DescribesTheSchemeAndKernel) {
  auto cfg = make_quant_config(ct_fp4_json("nvfp4-pack-quantized", kNvfp4));
  const Fp4Part d = nvfp4_part(random_nk(16, 32, 7), 16, 32);
  LayerFixture f{.config = cfg.get(), .spec = down_spec(32, 16), .backend = "cpu_ref"};
  auto layer = build_layer(f, {d.tensors}, {});
  EXPECT_EQ(layer->method().describe(), "compressed-tensors nvfp4 e2m1 g16 (e4m3 scales, global scale) [cpu_ref]");
  EXPECT_NE(cfg->describe().find("nvfp4-pack-quantized nvfp4 e2m1 g16"), std::string::npos) << cfg->describe();
}

// ---- bad inputs ----

TEST(Fp4Errors, CorruptScalesNameTheBlock) {
  auto nv = make_quant_config(ct_fp4_json("nvfp4-pack-quantized", kNvfp4));
  LayerFixture f{.config = nv.get(), .spec = down_spec(32, 8), .backend = "auto"};
  auto with_scale_code = [](Fp4Part p, int64_t i, uint8_t code) {
    p.tensors["weight_scale"] = p.tensors["weight_scale"].clone();
    p.tensors["weight_scale"].data<uint8_t>()[i] = code;
    return p;
  };
  const Fp4Part ok = nvfp4_part(random_nk(8, 32, 8), 8, 32);
  EXPECT_QLM_ERROR(build_layer(f, {with_scale_code(ok, 5, 0x7F).tensors}, {}), "weights.scale", "block [2, 1]");
  EXPECT_QLM_ERROR(build_layer(f, {with_scale_code(ok, 3, 0xB8).tensors}, {}), "weights.scale", "negative");
  for (float bad : {0.0f, -2.0f, std::nanf(""), INFINITY}) {
    Fp4Part p = ok;
    p.tensors["weight_global_scale"] = Tensor::from_vector(std::vector<float>{bad}, {1});
    EXPECT_QLM_ERROR(build_layer(f, {p.tensors}, {}), "weights.scale", "weight_global_scale");
  }
  // A zero block scale (an all-zero group) is a valid multiplier.
  EXPECT_NO_THROW(build_layer(f, {with_scale_code(ok, 0, 0x00).tensors}, {}));

  auto mx = make_quant_config(ct_fp4_json("mxfp4-pack-quantized", kMxfp4));
  LayerFixture fm{.config = mx.get(), .spec = down_spec(64, 4), .backend = "auto"};
  const Fp4Part mok = mxfp4_part(random_nk(4, 64, 9), 4, 64);
  EXPECT_QLM_ERROR(build_layer(fm, {with_scale_code(mok, 7, 0xFF).tensors}, {}), "weights.scale", "block [3, 1]");
  EXPECT_QLM_ERROR(build_layer(fm, {with_scale_code(mok, 2, 0xFE).tensors}, {}), "weights.scale", "overflows");
  EXPECT_NO_THROW(build_layer(fm, {with_scale_code(mok, 2, 0xFD).tensors}, {}));
}

TEST(Fp4Errors, ShapesDtypesAndPartitions) {
  auto nv = make_quant_config(ct_fp4_json("nvfp4-pack-quantized", kNvfp4));
  // K not a multiple of the group: named before any tensor is read.
  EXPECT_QLM_ERROR(LinearLayer(down_spec(40, 8), nv.get(), {}, {}), "weights.shape", "K = 40");
  // K = 48 splits into 24 columns a rank at TP 2, not a multiple of 16.
  EXPECT_QLM_ERROR(LinearLayer(down_spec(48, 8), nv.get(), {}, TpContext{.rank = 0, .size = 2, .comm = nullptr}),
                   "quant.partition", "K_p = 24");
  LayerFixture f{.config = nv.get(), .spec = down_spec(32, 8), .backend = "auto"};
  Fp4Part p = nvfp4_part(random_nk(8, 32, 10), 8, 32);
  Fp4Part f32_scale = p;
  f32_scale.tensors["weight_scale"] = p.tensors["weight_scale"].to(DType::F32);
  EXPECT_QLM_ERROR(build_layer(f, {f32_scale.tensors}, {}), "loader.dtype", "weight_scale");
  Fp4Part narrow = p;
  narrow.tensors["weight_packed"] = p.tensors["weight_packed"].narrow(1, 0, 8).contiguous();
  EXPECT_QLM_ERROR(build_layer(f, {narrow.tensors}, {}), "loader.shape", "weight_packed");
  EXPECT_QLM_ERROR(build_layer(f, {p.tensors}, {}, {"weight_global_scale"}), "loader.incomplete",
                   "weight_global_scale");
}

TEST(Fp4Errors, SchemesOutsideTheTwoFormatsAreNamed) {
  auto expect = [](const std::string& json, const std::string& fragment) {
    EXPECT_QLM_ERROR(make_quant_config(json), "config.unsupported_scheme", fragment);
  };
  expect(ct_fp4_json(
             "nvfp4-pack-quantized", kNvfp4,
             R"({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"})"),
         "NVFP4 W4A4");
  expect(ct_fp4_json("mxfp4-pack-quantized", kMxfp4,
                     R"({"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32, "dynamic": true})"),
         "MXFP4 W4A4");
  expect(ct_fp4_json("nvfp4-pack-quantized",
                     R"({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 32})"),
         "group_size 16");
  expect(
      ct_fp4_json(
          "mxfp4-pack-quantized",
          R"({"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32, "scale_dtype": "torch.float8_e4m3fn"})"),
      "uint8 (e8m0)");
  expect(ct_fp4_json(
             "nvfp4-pack-quantized",
             R"({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": false})"),
         "symmetric");
  expect(ct_fp4_json("pack-quantized", R"({"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32})"),
         "not 'pack-quantized'");
}

}  // namespace
}  // namespace qlm::testing
