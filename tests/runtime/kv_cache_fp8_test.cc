// The fp8 KV cache on the CPU (FORMATS.md §7): every fp8 code decodes as an independent reference
// says, the cache's encoder (stored = fp8(x / scale), saturating, round-to-nearest-even) matches a
// brute-force nearest-code search on every code, every tie and values around them; attention reads
// code · scale; per-head scales are loaded, reduced, sliced per rank and rejected with a named error
// when misshapen; a checkpoint's scales change the stored codes; a model fixture with an fp8_e4m3
// cache stays close to the f32-cache logits; --kv-cache-dtype rejects unknown names.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <tuple>

#include <sys/wait.h>

#include "config/hf_config.h"
#include "config/quant_config_source.h"
#include "core/float_convert.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "models/architecture.h"
#include "models/decoder_model.h"
#include "models/model_fixtures.h"
#include "quant/kv_cache/kv_cache_method.h"
#include "quant/quantization_config.h"
#include "runtime/kv_cache_scales.h"
#include "runtime/model.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/kv_cache.h"
#include "runtime/sampling.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ops::KvDType;

constexpr std::array<KvDType, 2> kFp8 = {KvDType::F8E4M3, KvDType::F8E5M2};

// `f` throws qlm::Error `code` whose message holds every fragment.
void expect_error(const std::function<void()>& f, const std::string& code, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "did not throw; expected " << code;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "lacks \"" << fragment << "\": " << e.what();
  }
}

// ---- an independent reference: the formats from their definitions, in double ----

struct Fp8Format {
  int exp_bits, man_bits, bias;
  uint8_t max_code;  // largest finite magnitude code
  bool has_inf;      // e5m2: exponent all ones is inf / NaN; e4m3fn: only S.1111.111 is NaN
};
Fp8Format format_of(KvDType d) {
  return d == KvDType::F8E4M3 ? Fp8Format{4, 3, 7, 0x7e, false} : Fp8Format{5, 2, 15, 0x7b, true};
}

double ref_decode(KvDType d, uint8_t code) {
  const Fp8Format f = format_of(d);
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int exp = (code & 0x7f) >> f.man_bits, man = code & ((1 << f.man_bits) - 1);
  const int exp_max = (1 << f.exp_bits) - 1;
  if (f.has_inf && exp == exp_max) return man == 0 ? sign * INFINITY : NAN;
  if (!f.has_inf && exp == exp_max && man == (1 << f.man_bits) - 1) return NAN;
  if (exp == 0) return sign * std::ldexp(man, 1 - f.bias - f.man_bits);
  return sign * std::ldexp(1.0 + std::ldexp(man, -f.man_bits), exp - f.bias);
}

// The nearest finite code (ties to the even code), the sign kept; NaN -> the format's positive NaN
// (the cache does not keep a NaN's sign); beyond the largest finite value (infinities too) -> the
// largest finite value.
uint8_t ref_encode(KvDType d, float y) {
  const Fp8Format f = format_of(d);
  const uint8_t sign = std::signbit(y) ? 0x80 : 0x00;
  if (std::isnan(y)) return d == KvDType::F8E4M3 ? 0x7f : 0x7e;
  const double mag = std::fabs(static_cast<double>(y));
  if (mag >= ref_decode(d, f.max_code)) return static_cast<uint8_t>(sign | f.max_code);  // saturates
  uint8_t best = 0;
  double best_dist = INFINITY;
  for (int c = 0; c <= f.max_code; ++c) {
    const double dist = std::fabs(ref_decode(d, static_cast<uint8_t>(c)) - mag);
    if (dist < best_dist || (dist == best_dist && (c & 1) == 0)) {
      best = static_cast<uint8_t>(c);
      best_dist = dist;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

// Every finite magnitude, the midpoints between neighbours (ties), a float either side of each,
// out-of-range values, infinities, NaN, tiny and f32-subnormal values, random values over the range;
// both signs.
std::vector<float> probe_values(KvDType d) {
  const Fp8Format f = format_of(d);
  std::vector<float> v;
  for (int c = 0; c <= f.max_code; ++c) {
    const float a = static_cast<float>(ref_decode(d, static_cast<uint8_t>(c)));
    v.push_back(a);
    if (c < f.max_code) {
      const float mid = static_cast<float>((ref_decode(d, static_cast<uint8_t>(c)) +
                                            ref_decode(d, static_cast<uint8_t>(c + 1))) / 2);
      v.insert(v.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)});
    }
  }
  const float max = static_cast<float>(ref_decode(d, f.max_code));
  const float top_mid = max + static_cast<float>(max - ref_decode(d, static_cast<uint8_t>(f.max_code - 1))) / 2;
  v.insert(v.end(), {top_mid, std::nextafter(top_mid, INFINITY), max * 4, 1e30f, INFINITY,
                     std::numeric_limits<float>::quiet_NaN(), 1e-30f, 1e-40f, std::numeric_limits<float>::denorm_min()});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> log2(-20.0f, 18.0f);
  for (int i = 0; i < 2000; ++i) v.push_back(std::exp2(log2(rng)));
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

TEST(KvCacheFp8, EveryCodeDecodesAsTheReference) {
  for (KvDType d : kFp8)
    for (int c = 0; c < 256; ++c) {
      const uint8_t code = static_cast<uint8_t>(c);
      const double want = ref_decode(d, code);
      const float got = ops::kv_decode(d, &code);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << ops::kv_dtype_name(d) << " code " << c;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << ops::kv_dtype_name(d) << " code " << c;
        // And every finite code survives encode(decode(code)) with scale 1.
        uint8_t back = 0;
        ops::kv_encode(d, got, 1.0f, &back);
        if (!std::isinf(want)) {
          EXPECT_EQ(back, code) << ops::kv_dtype_name(d) << " code " << c;
        }
      }
    }
}

// The cache's bytes, written through KvCache::write with a different scale per kv head, equal the
// reference encoding of the f32 quotient x / scale of each head.
TEST(KvCacheFp8, CacheEncodingMatchesTheReferenceOnEveryCodeAndTie) {
  for (KvDType d : kFp8)
    for (const auto& [s0, s1] : {std::pair{1.0f, 0.5f}, {0.0625f, 3.7f}, {0.013f, 1.0f}}) {
      const std::vector<float> probes = probe_values(d);
      const int64_t n = static_cast<int64_t>(probes.size());
      // Two heads of n values: head h holds probe · s_h, so the quotient lands on (or next to) the probe.
      std::vector<float> k(static_cast<size_t>(2 * n)), v(static_cast<size_t>(2 * n));
      for (int64_t i = 0; i < n; ++i) {
        k[static_cast<size_t>(i)] = probes[static_cast<size_t>(i)] * s0;
        k[static_cast<size_t>(n + i)] = probes[static_cast<size_t>(i)] * s1;
        v[static_cast<size_t>(i)] = -k[static_cast<size_t>(i)];
        v[static_cast<size_t>(n + i)] = -k[static_cast<size_t>(n + i)];
      }
      ops::KvCache cache(1, 2, n, {d});
      const std::vector<float> ks = {s0, s1}, vs = {s1, s0};
      cache.set_head_scales(0, ks, vs);
      cache.reserve(1);
      cache.write(0, 0, k.data(), v.data(), 1, 2 * n);
      const auto* kd = static_cast<const uint8_t*>(cache.k_data(0));
      const auto* vd = static_cast<const uint8_t*>(cache.v_data(0));
      int mismatches = 0;
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < n && mismatches < 10; ++i) {
          const size_t at = static_cast<size_t>(h * n + i);
          const uint8_t want_k = ref_encode(d, k[at] / ks[static_cast<size_t>(h)]);
          const uint8_t want_v = ref_encode(d, v[at] / vs[static_cast<size_t>(h)]);
          if (kd[at] != want_k || vd[at] != want_v) ++mismatches;
          EXPECT_EQ(kd[at], want_k) << ops::kv_dtype_name(d) << " head " << h << " x " << k[at];
          EXPECT_EQ(vd[at], want_v) << ops::kv_dtype_name(d) << " head " << h << " x " << v[at];
        }
      EXPECT_EQ(cache.k_scale(0, 1), s1);
      EXPECT_EQ(cache.v_scale(0, 0), s1);
    }
}

TEST(KvCacheFp8, ScaleChangesTheStoredCode) {
  // 100 / 1 -> 96 (e4m3 codes near 100 are 96 and 104: tie to even 96); 100 / 0.25 = 400 -> 384
  // (416 is odd); 100 / 0.1 = 1000 saturates to 448.
  const float x[1] = {100.0f};
  for (const auto& [scale, want] : {std::pair{1.0f, 96.0f}, {0.25f, 384.0f}, {0.1f, 448.0f}}) {
    ops::KvCache cache(1, 1, 1, {KvDType::F8E4M3});
    cache.set_scales(0, scale, scale);
    cache.reserve(1);
    cache.write(0, 0, x, x, 1, 1);
    EXPECT_EQ(ops::kv_decode(KvDType::F8E4M3, cache.k_data(0)), want) << scale;
  }
  EXPECT_EQ(ops::kv_dtype_size(KvDType::F8E5M2), 1u);
  EXPECT_TRUE(ops::kv_dtype_is_fp8(KvDType::F8E4M3));
  EXPECT_FALSE(ops::kv_dtype_is_fp8(KvDType::BF16));
}

// Attention over an fp8 cache equals attention over an F32 cache holding decode(code) · scale.
TEST(KvCacheFp8, AttentionReadsCodeTimesScale) {
  const int64_t heads = 4, kv_heads = 2, d = 16, T = 9, stride = (heads + 2 * kv_heads) * d;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> qkv(static_cast<size_t>(T * stride));
  for (float& x : qkv) x = normal(rng);
  const ops::AttentionParams p{.heads = heads, .kv_heads = kv_heads, .head_dim = d, .scale = 0.25f,
                               .sliding_window = 0};
  for (KvDType dt : kFp8) {
    ops::KvCache fp8(1, kv_heads, d, {dt});
    const std::vector<float> ks = {0.02f, 0.5f}, vs = {0.7f, 0.01f};
    fp8.set_head_scales(0, ks, vs);
    fp8.reserve(T);
    fp8.write(0, 0, qkv.data() + heads * d, qkv.data() + (heads + kv_heads) * d, T, stride);
    // The dequantized K/V, written into an exact F32 cache.
    std::vector<float> deq = qkv;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < kv_heads; ++h)
        for (int64_t i = 0; i < d; ++i) {
          const int64_t at = (t * kv_heads + h) * d + i;
          deq[static_cast<size_t>(t * stride + (heads + h) * d + i)] =
              ops::kv_decode(dt, static_cast<const uint8_t*>(fp8.k_data(0)) + at) * ks[static_cast<size_t>(h)];
          deq[static_cast<size_t>(t * stride + (heads + kv_heads + h) * d + i)] =
              ops::kv_decode(dt, static_cast<const uint8_t*>(fp8.v_data(0)) + at) * vs[static_cast<size_t>(h)];
        }
    ops::KvCache f32(1, kv_heads, d);
    f32.reserve(T);
    f32.write(0, 0, deq.data() + heads * d, deq.data() + (heads + kv_heads) * d, T, stride);
    std::vector<float> got(static_cast<size_t>(T * heads * d)), want(got.size());
    ops::attention(qkv.data(), stride, T, 0, fp8, 0, p, got.data(), heads * d);
    ops::attention(qkv.data(), stride, T, 0, f32, 0, p, want.data(), heads * d);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << ops::kv_dtype_name(dt) << " i=" << i;
  }
}

Tensor scale_tensor(std::vector<float> values, Shape shape) { return Tensor::from_vector(std::move(values), shape); }

TEST(KvCacheFp8, PerHeadScalesAreReducedSlicedAndChecked) {
  const std::string L = "model.layers.1.self_attn";
  KVCacheQuantMethod kv(L, KVCacheDType::Fp8E4M3);
  kv.set_head_counts(8, 2);
  ASSERT_TRUE(kv.load(L + ".k_scale", scale_tensor({0.5f, 2.0f}, {2, 1, 1})));  // attn_head: [kv_heads, 1, 1]
  // One per attention head: reduced to the kv heads by the max over each group of 4.
  ASSERT_TRUE(kv.load(L + ".v_scale", scale_tensor({1, 3, 2, 1, 0.25f, 0.5f, 0.125f, 0.5f}, {8})));
  kv.process_weights_after_loading();
  EXPECT_TRUE(kv.per_head());
  EXPECT_EQ(kv.k_scales(0, 2), (std::vector<float>{0.5f, 2.0f}));
  EXPECT_EQ(kv.v_scales(0, 2), (std::vector<float>{3.0f, 0.5f}));
  EXPECT_EQ(kv.k_scales(1, 1), (std::vector<float>{2.0f}));  // the second tensor-parallel rank's head
  EXPECT_EQ(kv.k_scale(), 2.0f);                               // per-tensor view: the largest head
  EXPECT_EQ(kv_scale_report({&kv}),
            "KV cache fp8_e4m3: scales from the checkpoint for 1 of 1 attention layers (per head)");

  // A per-tensor scale serves every head.
  KVCacheQuantMethod scalar(L, KVCacheDType::Fp8E4M3);
  scalar.load(L + ".kv_scale", scale_tensor({0.25f}, {}));
  scalar.process_weights_after_loading();
  EXPECT_EQ(scalar.v_scales(3, 2), (std::vector<float>{0.25f, 0.25f}));

  // Neither kv heads nor attention heads: named, with the shape and what was expected.
  KVCacheQuantMethod bad(L, KVCacheDType::Fp8E4M3);
  bad.set_head_counts(8, 2);
  expect_error([&] { bad.load(L + ".k_scale", scale_tensor({1, 1, 1}, {3})); }, "kv_cache.scale_shape",
               {"model.layers.1.self_attn.k_scale", "[3]", "2 elements (num_key_value_heads)", "8 (num_attention_heads)"});
  // One bad head is named.
  KVCacheQuantMethod zero(L, KVCacheDType::Fp8E4M3);
  zero.set_head_counts(8, 2);
  zero.load(L + ".k_scale", scale_tensor({1.0f, 0.0f}, {2}));
  EXPECT_QLM_ERROR(zero.process_weights_after_loading(), "kv_cache.scale", "(head 1)");

  // Through the ModuleSet: the checkpoint's shape is declared, a wrong one named before loading.
  ModuleSet m;
  KVCacheQuantMethod via_loader(L, KVCacheDType::Fp8E4M3);
  via_loader.set_head_counts(8, 2);
  const ScaleShapeLookup shapes = [&](const std::string& name) -> std::optional<Shape> {
    if (name == L + ".k_scale") return Shape{2, 1, 1};
    if (name == L + ".v_scale") return Shape{5};
    return std::nullopt;
  };
  expect_error([&] { via_loader.register_params(m, shapes); }, "kv_cache.scale_shape", {"v_scale", "[5]"});
}

TEST(KvCacheFp8, DTypeVocabulary) {
  EXPECT_EQ(parse_kv_cache_dtype("auto"), KVCacheDType::Auto);
  EXPECT_EQ(parse_kv_cache_dtype("f32"), KVCacheDType::F32);
  EXPECT_EQ(parse_kv_cache_dtype("float16"), KVCacheDType::F16);
  EXPECT_EQ(parse_kv_cache_dtype("bfloat16"), KVCacheDType::BF16);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), KVCacheDType::Fp8E4M3);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e5m2"), KVCacheDType::Fp8E5M2);
  for (const char* bad : {"fp8_e4m3fn", "int8", "FP8", ""})
    expect_error([&] { parse_kv_cache_dtype(bad); }, "config.kv_cache_dtype", {"--kv-cache-dtype", "fp8_e5m2"});
  EXPECT_EQ(runtime::kv_storage_dtype(KVCacheDType::Auto, DType::F32), KvDType::F32);
  EXPECT_EQ(runtime::kv_storage_dtype(KVCacheDType::Auto, DType::BF16), KvDType::BF16);
  EXPECT_EQ(runtime::kv_storage_dtype(KVCacheDType::Auto, DType::F16), KvDType::F16);
  EXPECT_EQ(runtime::kv_storage_dtype(KVCacheDType::Fp8E4M3, DType::BF16), KvDType::F8E4M3);
  EXPECT_EQ(runtime::kv_storage_dtype(KVCacheDType::F32, DType::BF16), KvDType::F32);
}

// ---- whole models ----

Tensor logits_with(const fs::path& dir, KVCacheDType kv, int tp = 1) {
  auto model = runtime::Model::load(dir, {.tp = tp, .kv_cache_dtype = kv});
  return model->forward(testing::load_model_fixture(dir.filename().string()).tokens);
}

struct Agreement {
  int64_t same = 0, total = 0;
};
Agreement argmax_agreement(const Tensor& a, const Tensor& b) {
  Agreement r;
  const int64_t T = a.size(0), V = a.size(1);
  for (int64_t t = 0; t < T; ++t) {
    const auto row = [&](const Tensor& x) { return std::span<const float>(x.data<float>() + t * V, static_cast<size_t>(V)); };
    r.same += runtime::argmax(row(a)) == runtime::argmax(row(b)) ? 1 : 0;
    ++r.total;
  }
  return r;
}

// An fp8 cache with scale 1 rounds every cached K/V element to 3 (e4m3) or 2 (e5m2) mantissa bits:
// a relative error of at most 2^-4 (2^-3) per element, which partly averages out over head_dim-long
// dot products and the softmax-weighted sum of V. Measured on these fixtures (24 tokens, 2 layers),
// the normwise relative error of the logits is 2.0–2.4 % for e4m3 and 4.0–4.9 % for e5m2; the
// bounds, 5 % and 10 %, are about twice that. Argmax agreed on 23–24 of 24 positions for e4m3 and
// 21–24 for e5m2 (positions whose f32 top-2 gap is a few tenths of a logit can flip), so at least
// 90 % (e4m3) and 80 % (e5m2) of positions must agree.
TEST(KvCacheFp8Model, Fp8CacheStaysCloseToF32Cache) {
  for (const char* name : {"llama-gqa", "mistral-swa", "qwen3-qknorm", "llama3-rope-bias", "qwen2-bias-tied"}) {
    const fs::path dir = testing::model_fixture_root() / name;
    const Tensor f32 = logits_with(dir, KVCacheDType::F32);
    for (const auto& [kv, tolerance, agree] :
         {std::tuple{KVCacheDType::Fp8E4M3, 0.05, 0.9}, {KVCacheDType::Fp8E5M2, 0.10, 0.8}}) {
      const Tensor fp8 = logits_with(dir, kv);
      const double err = testing::normwise_relative_error(fp8, f32);
      EXPECT_LE(err, tolerance) << name << " " << kv_cache_dtype_name(kv);
      EXPECT_GT(err, 0.0) << name << ": the fp8 cache must round something";
      const Agreement a = argmax_agreement(fp8, f32);
      EXPECT_GE(static_cast<double>(a.same), agree * static_cast<double>(a.total)) << name << " " << kv_cache_dtype_name(kv) << ": " << a.same << " of "
                                          << a.total << " positions agree";
      std::printf("[ fp8 kv ] %-18s %-8s normwise %.4f argmax %lld/%lld\n", name, kv_cache_dtype_name(kv), err,
                  static_cast<long long>(a.same), static_cast<long long>(a.total));
    }
  }
  // The report of a load without checkpoint scales.
  auto model = runtime::Model::load(testing::model_fixture_root() / "llama-gqa", {.kv_cache_dtype = KVCacheDType::Fp8E4M3});
  EXPECT_EQ(model->kv_cache_dtype(), KvDType::F8E4M3);
  EXPECT_EQ(model->kv_cache_report(),
            "KV cache fp8_e4m3: scales from the checkpoint for 0 of 2 attention layers, 2 defaulted to 1.0");
  EXPECT_EQ(runtime::Model::load(testing::model_fixture_root() / "llama-gqa")->kv_cache_report(),
            "KV cache f32 (auto: the activation dtype)");
}

// A compressed-tensors checkpoint that quantizes only the KV cache (llm-compressor's kv_cache_scheme
// with no config groups), made from the llama-gqa fixture: per-head (attn_head) k/v scales
// [kv_heads, 1, 1] per layer, or whatever `scales` says.
using ScaleWriter = std::function<void(std::vector<std::pair<std::string, Tensor>>&, int64_t layer)>;
void write_kv_scheme_checkpoint(const testing::TempDir& dir, const std::string& strategy, const ScaleWriter& scales) {
  const fs::path src = testing::model_fixture_root() / "llama-gqa";
  const io::Checkpoint ck = io::Checkpoint::open(src);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : ck.tensor_names()) tensors.emplace_back(name, ck.tensor(name).clone());
  for (int64_t l = 0; l < 2; ++l) scales(tensors, l);
  io::write_safetensors(dir / "model.safetensors", tensors);
  std::ifstream in(src / "config.json");
  json config = json::parse(in);
  config["quantization_config"] = {
      {"quant_method", "compressed-tensors"},
      {"format", "dense"},
      {"config_groups", json::object()},
      {"kv_cache_scheme",
       {{"type", "float"}, {"num_bits", 8}, {"strategy", strategy}, {"symmetric", true}, {"dynamic", false}}}};
  std::ofstream(dir / "config.json") << config.dump(2);
  for (const char* f : {"expected.json", "tokenizer.json", "tokenizer_config.json"}) fs::copy_file(src / f, dir / f);
}

// Head 0 of K gets a small scale (codes finer than with 1.0), head 1 a large one (coarser); V the
// other way round; layer 1 uses other values.
const std::array<std::array<float, 2>, 2> kKScales = {{{0.01f, 4.0f}, {0.05f, 0.5f}}};
const std::array<std::array<float, 2>, 2> kVScales = {{{2.0f, 0.02f}, {0.25f, 0.03f}}};

void per_head_scales(std::vector<std::pair<std::string, Tensor>>& t, int64_t l) {
  const std::string p = fmt::format("model.layers.{}.self_attn.", l);
  const auto& k = kKScales[static_cast<size_t>(l)];
  const auto& v = kVScales[static_cast<size_t>(l)];
  t.emplace_back(p + "k_scale", Tensor::from_vector(std::vector<float>{k[0], k[1]}, {2, 1, 1}));
  t.emplace_back(p + "v_scale", Tensor::from_vector(std::vector<float>{v[0], v[1]}, {2, 1, 1}));
}

// One rank built and loaded as Model::load does (tp 1), so its cache can be read.
struct LoadedRank {
  std::unique_ptr<QuantizationConfig> quant;
  std::unique_ptr<models::DecoderModel> rank;
  runtime::KvCacheMethods methods;
};
LoadedRank load_rank(const fs::path& dir, KVCacheDType requested) {
  LoadedRank r;
  const config::HfConfig hf = config::HfConfig::load(dir);
  const io::Checkpoint ck = io::Checkpoint::open(dir);
  const std::optional<config::QuantConfigSource> source = config::find_quant_config(dir);
  r.quant = resolve_quantization_config(source ? std::optional<io::JsonView>(source->config) : std::nullopt,
                                        std::nullopt);
  const KVCacheDType kv = runtime::resolve_kv_cache_dtype(requested, r.quant.get());
  const QuantContext ctx{};
  const models::RankOptions options{.quant = r.quant.get(), .ctx = ctx, .tp = {},
                                    .kv = {.dtype = runtime::kv_storage_dtype(kv, DType::F32)}};
  r.rank = std::make_unique<models::DecoderModel>(models::configure_model(hf), options, models::checkpoint_dtypes(ck));
  r.methods = runtime::attach_kv_cache_methods(
      *r.rank, r.quant.get(), ctx, kv_cache_dtype_is_fp8(kv) ? kv : KVCacheDType::Auto,
      [&](const std::string& name) -> std::optional<Shape> {
        if (!ck.contains(name)) return std::nullopt;
        return ck.info(name).shape;
      });
  r.rank->load(ck);
  runtime::finish_kv_cache_methods(r.methods, *r.rank);
  return r;
}

TEST(KvCacheFp8Model, CheckpointPerHeadScalesAreWhatIsStored) {
  testing::TempDir dir;
  write_kv_scheme_checkpoint(dir, "attn_head", per_head_scales);
  const std::vector<int32_t> tokens = testing::load_model_fixture("llama-gqa").tokens;
  const int64_t T = static_cast<int64_t>(tokens.size()), d = 16, kv_heads = 2;

  // The scheme turns auto into fp8_e4m3 and every layer's scales reach the cache.
  LoadedRank fp8 = load_rank(dir.path(), KVCacheDType::Auto);
  ASSERT_EQ(fp8.methods.size(), 2u);
  EXPECT_EQ(runtime::kv_cache_report(fp8.methods),
            "KV cache fp8_e4m3: scales from the checkpoint for 2 of 2 attention layers (per head)");
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < kv_heads; ++h) {
      EXPECT_EQ(fp8.rank->cache().k_scale(l, h), kKScales[static_cast<size_t>(l)][static_cast<size_t>(h)]);
      EXPECT_EQ(fp8.rank->cache().v_scale(l, h), kVScales[static_cast<size_t>(l)][static_cast<size_t>(h)]);
    }
  // Layer 0's K/V do not depend on the cache (they come from the embeddings): the exact values,
  // read from an F32 cache, encoded with each head's scale, are the fp8 cache's bytes.
  LoadedRank exact = load_rank(dir.path(), KVCacheDType::F32);
  ASSERT_EQ(exact.rank->cache().encoding().dtype, KvDType::F32);
  const std::vector<int64_t> positions = [&] {
    std::vector<int64_t> p(static_cast<size_t>(T));
    for (int64_t i = 0; i < T; ++i) p[static_cast<size_t>(i)] = i;
    return p;
  }();
  fp8.rank->forward(tokens, positions, true);
  exact.rank->forward(tokens, positions, true);
  int64_t changed = 0;  // codes that differ from what scale 1.0 would store
  for (const bool is_k : {true, false}) {
    const float* x = static_cast<const float*>(is_k ? exact.rank->cache().k_data(0) : exact.rank->cache().v_data(0));
    const uint8_t* got = static_cast<const uint8_t*>(is_k ? fp8.rank->cache().k_data(0) : fp8.rank->cache().v_data(0));
    for (int64_t i = 0; i < T * kv_heads * d; ++i) {
      const int64_t h = (i / d) % kv_heads;
      const float s = (is_k ? kKScales : kVScales)[0][static_cast<size_t>(h)];
      ASSERT_EQ(got[i], f32_to_e4m3(x[i] / s)) << (is_k ? "k" : "v") << " element " << i;
      changed += got[i] != f32_to_e4m3(x[i]) ? 1 : 0;
    }
  }
  EXPECT_GT(changed, T * kv_heads * d) << "the checkpoint's scales must change what is stored";

  // Through Model::load: the same report, and tensor parallelism (one kv head per rank, each with
  // its own scale) gives the tp-1 logits up to summation order.
  auto model = runtime::Model::load(dir.path());
  EXPECT_EQ(model->kv_cache_dtype(), KvDType::F8E4M3);
  EXPECT_EQ(model->kv_cache_report(), runtime::kv_cache_report(fp8.methods));
  const Tensor tp1 = model->forward(tokens);
  const Tensor tp2 = runtime::Model::load(dir.path(), {.tp = 2})->forward(tokens);
  EXPECT_LE(testing::normwise_relative_error(tp2, tp1), 1e-3);
  // With the scales the logits differ from a scale-1 fp8 cache, and stay close to the f32 cache.
  const Tensor unscaled = logits_with(testing::model_fixture_root() / "llama-gqa", KVCacheDType::Fp8E4M3);
  const Tensor f32 = logits_with(testing::model_fixture_root() / "llama-gqa", KVCacheDType::F32);
  EXPECT_NE(tp1.to_float_vector(), unscaled.to_float_vector());
  EXPECT_LE(testing::normwise_relative_error(tp1, f32), 0.2);

  // An explicit f16 cache ignores the scales; fp8_e5m2 is refused for a checkpoint with its own scales.
  EXPECT_EQ(runtime::Model::load(dir.path(), {.kv_cache_dtype = KVCacheDType::F16})->kv_cache_report(), "KV cache f16");
  EXPECT_QLM_ERROR(runtime::Model::load(dir.path(), {.kv_cache_dtype = KVCacheDType::Fp8E5M2}),
                   "config.kv_cache_dtype", "fp8_e5m2 kv-cache is not supported with compressed-tensors checkpoints");
}

TEST(KvCacheFp8Model, MisshapenCheckpointScaleIsNamed) {
  testing::TempDir dir;
  write_kv_scheme_checkpoint(dir, "attn_head", [](auto& t, int64_t l) {
    const std::string p = fmt::format("model.layers.{}.self_attn.", l);
    t.emplace_back(p + "k_scale", Tensor::from_vector(std::vector<float>{1, 1, 1}, {3, 1}));
    t.emplace_back(p + "v_scale", Tensor::from_vector(std::vector<float>{1, 1}, {2}));
  });
  expect_error([&] { runtime::Model::load(dir.path()); }, "kv_cache.scale_shape",
               {"model.layers.0.self_attn.k_scale", "[3, 1]", "2 elements (num_key_value_heads) or 4 (num_attention_heads)"});
}

TEST(KvCacheFp8Model, PerTensorCheckpointScale) {
  testing::TempDir dir;
  write_kv_scheme_checkpoint(dir, "tensor", [](auto& t, int64_t l) {
    const std::string p = fmt::format("model.layers.{}.self_attn.", l);
    t.emplace_back(p + "k_scale", Tensor::from_vector(std::vector<float>{0.03f}, Shape{}));
    t.emplace_back(p + "v_scale", Tensor::from_vector(std::vector<float>{0.02f}, Shape{}));
  });
  LoadedRank r = load_rank(dir.path(), KVCacheDType::Fp8E4M3);
  EXPECT_EQ(runtime::kv_cache_report(r.methods),
            "KV cache fp8_e4m3: scales from the checkpoint for 2 of 2 attention layers");
  EXPECT_EQ(r.rank->cache().k_scale(1, 1), 0.03f);
  EXPECT_EQ(r.rank->cache().v_scale(0, 0), 0.02f);
}

// ---- the command line ----

struct RunResult {
  int status = -1;
  std::string err;
};
RunResult run_qlm(const std::string& args, const testing::TempDir& dir) {
  const fs::path err_file = dir / "stderr.txt";
  const std::string command = "'" + (fs::path(QLM_BINARY_DIR) / "qlm").string() + "' " + args + " >/dev/null 2>'" +
                              err_file.string() + "'";
  RunResult r;
  const int raw = std::system(command.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  return r;
}

TEST(KvCacheFp8Cli, KvCacheDtypeFlag) {
  testing::TempDir dir;
  const std::string model = (testing::model_fixture_root() / "llama-gqa").string();
  const std::string out = (dir / "o.safetensors").string();
  const std::string logits = "logits '" + model + "' --tokens \"1 2 3\" --out '" + out + "' --kv-cache-dtype ";
  for (const char* bad : {"int8", "fp8_e4m3fn", "f8"}) {
    const RunResult r = run_qlm(logits + bad, dir);
    EXPECT_EQ(r.status, 1) << bad;
    EXPECT_NE(r.err.find("config.kv_cache_dtype"), std::string::npos) << bad << "\n" << r.err;
    EXPECT_NE(r.err.find(std::string("unknown KV cache dtype '") + bad + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("auto, f32, f16, bf16, fp8 (= fp8_e4m3), fp8_e4m3 or fp8_e5m2"), std::string::npos) << r.err;
  }
  RunResult r = run_qlm(logits + "fp8", dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("KV cache fp8_e4m3: scales from the checkpoint for 0 of 2 attention layers, 2 defaulted to 1.0"),
            std::string::npos)
      << r.err;
  r = run_qlm(logits + "fp8_e5m2", dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("KV cache fp8_e5m2"), std::string::npos) << r.err;
  r = run_qlm(logits + "bf16", dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("KV cache bf16\n"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace qlm
