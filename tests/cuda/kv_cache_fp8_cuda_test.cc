// The fp8 KV cache on CUDA against the CPU cache: the device encoder writes the same bytes as
// ops::KvCache for the same inputs (every fp8 code, the ties between neighbours, a float either side,
// saturation, infinities, NaN, f32 subnormals, random values; per-head scales), attention over the
// device fp8 cache matches the CPU attention over the CPU fp8 cache, and whole models with an fp8
// cache on cuda:0 give the CPU fp8-cache logits. Skipped without a visible GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/float_convert.h"
#include "cuda/device.h"
#include "models/model_fixtures.h"
#include "runtime/model.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/cuda/device_ops.h"
#include "runtime/ops/kv_cache.h"
#include "runtime/sampling.h"

namespace qlm {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device visible"

const Device kGpu = Device::cuda(0);
using ops::KvDType;

// Every value an fp8 code stands for, the midpoints between neighbouring codes and a float either
// side of each, specials and random values over [2^-20, 2^18], both signs.
std::vector<float> probe_values(KvDType d) {
  std::vector<float> codes;
  for (int c = 0; c < 128; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const float x = ops::kv_decode(d, &code);
    if (std::isfinite(x)) codes.push_back(x);
  }
  std::vector<float> v;
  for (size_t i = 0; i < codes.size(); ++i) {
    v.push_back(codes[i]);
    if (i + 1 < codes.size()) {
      const float mid = (codes[i] + codes[i + 1]) / 2;  // exact: fp8 values have at most 4 significant bits
      v.insert(v.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)});
    }
  }
  v.insert(v.end(), {codes.back() * 1.1f, 1e30f, INFINITY, std::numeric_limits<float>::quiet_NaN(), 1e-30f, 1e-40f,
                     std::numeric_limits<float>::denorm_min(), 0.0f});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> log2(-20.0f, 18.0f);
  for (int i = 0; i < 3000; ++i) v.push_back(std::exp2(log2(rng)));
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

std::vector<uint8_t> device_bytes(const Tensor& t, int64_t rows) {
  const Tensor host = t.narrow(0, 0, rows).to_device(Device::cpu());
  const size_t n = static_cast<size_t>(rows * t.size(1)) * dtype_size(t.dtype());
  std::vector<uint8_t> out(n);
  std::memcpy(out.data(), host.raw_data(), n);
  return out;
}

TEST(CudaKvCacheFp8, DeviceBytesEqualCpuBytes) {
  SKIP_WITHOUT_GPU();
  for (KvDType d : {KvDType::F8E4M3, KvDType::F8E5M2, KvDType::BF16, KvDType::F16, KvDType::F32}) {
    std::vector<float> probes = probe_values(d);
    // F16 / BF16 NaN payloads are not specified alike on both sides (fp8 NaN is: one positive code).
    if (!ops::kv_dtype_is_fp8(d)) std::erase_if(probes, [](float x) { return std::isnan(x); });
    const int64_t kv_heads = 2, head_dim = 64;
    const int64_t row = kv_heads * head_dim;
    const int64_t tokens = (static_cast<int64_t>(probes.size()) + row - 1) / row;
    // qkv rows [tokens, 3·row]: q (unused) | k | v; v holds the probes in reverse order.
    const int64_t stride = 3 * row;
    std::vector<float> qkv(static_cast<size_t>(tokens * stride), 0.0f);
    for (size_t i = 0; i < probes.size(); ++i) {
      const int64_t t = static_cast<int64_t>(i) / row, c = static_cast<int64_t>(i) % row;
      qkv[static_cast<size_t>(t * stride + row + c)] = probes[i];
      qkv[static_cast<size_t>(t * stride + 2 * row + c)] = probes[probes.size() - 1 - i];
    }
    for (const auto& [ks, vs] : {std::pair{std::vector<float>{1.0f, 1.0f}, std::vector<float>{1.0f, 1.0f}},
                                 {std::vector<float>{0.0625f, 3.7f}, std::vector<float>{0.013f, 2.0f}}}) {
      ops::KvCache host(1, kv_heads, head_dim, {d});
      ops::cu::DeviceKvCache dev(kGpu, 1, kv_heads, head_dim, {d});
      host.set_head_scales(0, ks, vs);
      dev.set_head_scales(0, ks, vs);
      host.reserve(tokens);
      dev.reserve(tokens);
      host.write(0, 0, qkv.data() + row, qkv.data() + 2 * row, tokens, stride);
      dev.write(0, 0, Tensor::from_vector(qkv, {tokens, stride}).to_device(kGpu), row, 2 * row);
      const size_t nbytes = static_cast<size_t>(tokens * row) * ops::kv_dtype_size(d);
      const std::vector<uint8_t> dk = device_bytes(dev.k(0), tokens), dv = device_bytes(dev.v(0), tokens);
      const auto* hk = static_cast<const uint8_t*>(host.k_data(0));
      const auto* hv = static_cast<const uint8_t*>(host.v_data(0));
      size_t first_diff = nbytes;
      for (size_t i = 0; i < nbytes && first_diff == nbytes; ++i)
        if (dk[i] != hk[i] || dv[i] != hv[i]) first_diff = i;
      EXPECT_EQ(first_diff, nbytes) << ops::kv_dtype_name(d) << " scales " << ks[1] << ": first differing byte "
                                    << first_diff << " (element " << first_diff / ops::kv_dtype_size(d) << ")";
    }
  }
}

// The device ops exist only in CUDA builds (DeviceKvCache's write is CUDA code too).
#ifdef QLM_WITH_CUDA
TEST(CudaKvCacheFp8, AttentionMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t heads = 8, kv_heads = 2, d = 64, stride = (heads + 2 * kv_heads) * d;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  for (KvDType kv : {KvDType::F8E4M3, KvDType::F8E5M2})
    for (int64_t window : {int64_t{0}, int64_t{7}}) {
      ops::KvCache host(1, kv_heads, d, {kv});
      ops::cu::DeviceKvCache dev(kGpu, 1, kv_heads, d, {kv});
      const std::vector<float> ks = {0.03f, 0.4f}, vs = {0.5f, 0.02f};
      host.set_head_scales(0, ks, vs);
      dev.set_head_scales(0, ks, vs);
      const ops::AttentionParams p{.heads = heads, .kv_heads = kv_heads, .head_dim = d, .scale = 0.125f,
                                   .sliding_window = window};
      int64_t past = 0;
      for (const int64_t T : {int64_t{33}, int64_t{1}, int64_t{20}}) {
        std::vector<float> qkv(static_cast<size_t>(T * stride));
        for (float& x : qkv) x = normal(rng);
        host.reserve(past + T);
        dev.reserve(past + T);
        host.write(0, past, qkv.data() + heads * d, qkv.data() + (heads + kv_heads) * d, T, stride);
        const Tensor qkv_dev = Tensor::from_vector(qkv, {T, stride}).to_device(kGpu);
        dev.write(0, past, qkv_dev, heads * d, (heads + kv_heads) * d);
        std::vector<float> want(static_cast<size_t>(T * heads * d));
        ops::attention(qkv.data(), stride, T, past, host, 0, p, want.data(), heads * d);
        const std::vector<float> got =
            ops::cu::attention(qkv_dev, past, dev, 0, p, DType::F32).to_device(Device::cpu()).to_float_vector();
        // Same codes, F32 math in another order: within 1e-5 of the output's scale.
        double diff = 0, ref = 1e-30;
        for (size_t i = 0; i < want.size(); ++i) {
          diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
          ref = std::max(ref, std::fabs(static_cast<double>(want[i])));
        }
        EXPECT_LE(diff / ref, 1e-5) << ops::kv_dtype_name(kv) << " window " << window << " T " << T;
        host.commit(T);
        dev.commit(T);
        past += T;
      }
    }
}

// F32 activations on cuda:0 and an fp8_e4m3 cache against the CPU with the same cache. The K/V the
// two devices compute differ by ~1e-6 relative (F32 GEMMs in another order), so a cached element
// can land on the other side of an fp8 rounding midpoint and change by one code step (≤ 12.5 % of
// itself); such flips are rare (a few per model at most) and diluted in the logits. Measured flips
// are not available here; a bound of 1e-2 normwise (the CPU f32-vs-fp8 cache difference is ~2 %) and
// argmax agreement on ≥ 90 % of positions leave room for them while catching a wrong encoding
// (which moves the logits by the full fp8 error, ~2e-2, or more) or wrong scales.
#endif  // QLM_WITH_CUDA

TEST(CudaKvCacheFp8, ModelLogitsMatchCpuFp8Cache) {
  SKIP_WITHOUT_GPU();
  for (const char* name : {"llama-gqa", "mistral-swa", "qwen3-qknorm-gptq", "qwen2-bias-tied"})
    for (KVCacheDType kv : {KVCacheDType::Fp8E4M3, KVCacheDType::Fp8E5M2}) {
      const std::string what = std::string(name) + " " + kv_cache_dtype_name(kv);
      const testing::ModelFixture f = testing::load_model_fixture(name);
      runtime::ModelOptions cpu_options;
      cpu_options.kv_cache_dtype = kv;
      runtime::ModelOptions gpu_options = cpu_options;
      gpu_options.device = kGpu;
      gpu_options.act_dtype = DType::F32;
      auto cpu = runtime::Model::load(f.dir, cpu_options);
      auto gpu = runtime::Model::load(f.dir, gpu_options);
      EXPECT_EQ(gpu->kv_cache_report(), cpu->kv_cache_report()) << what;
      const Tensor want = cpu->forward(f.tokens);
      const Tensor got = gpu->forward(f.tokens);
      ASSERT_EQ(got.shape(), want.shape()) << what;
      EXPECT_LE(testing::normwise_relative_error(got, want), 1e-2) << what;
      const int64_t T = want.size(0), V = want.size(1);
      int64_t same = 0;
      for (int64_t t = 0; t < T; ++t) {
        const auto row = [&](const Tensor& x) { return std::span<const float>(x.data<float>() + t * V, static_cast<size_t>(V)); };
        same += runtime::argmax(row(got)) == runtime::argmax(row(want)) ? 1 : 0;
      }
      EXPECT_GE(same * 10, T * 9) << what << ": " << same << " of " << T << " positions agree";
    }
}

// auto on CUDA is the activation dtype.
TEST(CudaKvCacheFp8, AutoIsTheActivationDtype) {
  SKIP_WITHOUT_GPU();
  const std::filesystem::path dir = testing::model_fixture_root() / "llama-gqa";
  for (const auto& [act, kv] : {std::pair{DType::BF16, KvDType::BF16}, {DType::F16, KvDType::F16}, {DType::F32, KvDType::F32}}) {
    runtime::ModelOptions o;
    o.device = kGpu;
    o.act_dtype = act;
    EXPECT_EQ(runtime::Model::load(dir, o)->kv_cache_dtype(), kv) << dtype_name(act);
  }
}

}  // namespace
}  // namespace qlm
