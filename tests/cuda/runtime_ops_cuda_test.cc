// The runtime's CUDA ops against the CPU ops of src/runtime/ops on random data: RMSNorm (rows and
// per-head), rotary, SiLU·mul, embedding gather, residual add, the device KV cache (F32/F16/BF16
// storage with k/v scales, growth keeping contents), attention (GQA, causal, sliding window,
// prefill and decode) and the decode graph's last kernel (greedy token, next slot and angles). Skipped without a
// visible GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/env_switch.h"
#include "core/float_convert.h"
#include "cuda/device.h"
#include "runtime/ops/activation.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/cuda/device_ops.h"
#include "runtime/ops/cuda/launch.h"
#include "runtime/ops/kv_cache.h"
#include "runtime/ops/rms_norm.h"
#include "runtime/ops/rope.h"
#include "runtime/sampling.h"

// The device ops exist only in CUDA builds.
#ifdef QLM_WITH_CUDA
namespace qlm {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device visible"

const Device kGpu = Device::cuda(0);

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor upload(const std::vector<float>& v, Shape shape) { return Tensor::from_vector(v, std::move(shape)).to_device(kGpu); }
std::vector<float> download(const Tensor& t) { return t.to_device(Device::cpu()).to(DType::F32).to_float_vector(); }

// max |a - b| / (max |b| + tiny)
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, ref = 1e-30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    ref = std::max(ref, std::fabs(static_cast<double>(b[i])));
  }
  return diff / ref;
}

double tolerance_of(DType d) { return d == DType::F32 ? 1e-5 : d == DType::F16 ? 2e-3 : 1.6e-2; }

// Widths that take every path of the kernel: 16-byte loads held in registers, one to four a thread (96, 4096,
// 5000, 8192, 16384: 24 to 1024 threads), in the general loop past that (16400), and single floats (4095: odd
// width, so rows 3..4 also start unaligned).
TEST(CudaRuntimeOps, RmsNormRowsAndHeads) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 5, heads = 3, d = 32;
  for (const int64_t width : {96, 4095, 4096, 5000, 8192, 16384, 16400}) {
    const std::vector<float> x = random_floats(static_cast<size_t>(T * width), 1, 3.0f);
    const std::vector<float> w = random_floats(static_cast<size_t>(width), 2);
    for (DType out : {DType::F32, DType::F16, DType::BF16}) {
      std::vector<float> want(static_cast<size_t>(2 * width));  // rows 3 and 4
      ops::rms_norm(x.data() + 3 * width, width, w.data(), want.data(), width, 2, width, 1e-6f);
      const Tensor got = ops::cu::rms_norm(upload(x, {T, width}), 3, 2, upload(w, {width}), 1e-6f, out);
      EXPECT_EQ(got.dtype(), out);
      EXPECT_LE(max_rel_diff(download(got), want), tolerance_of(out))
          << "rms_norm width " << width << " rows 3..4, out " << dtype_name(out);
    }
  }
  const int64_t H = 96;
  const std::vector<float> hw = random_floats(static_cast<size_t>(d), 3);
  // Per-head norm in place on columns [d, d + heads·d) of a [T, H + d] tensor.
  const int64_t stride = H + d;
  std::vector<float> xh = random_floats(static_cast<size_t>(T * stride), 4, 2.0f);
  Tensor dev = upload(xh, {T, stride});
  ops::cu::head_rms_norm(dev, d, heads, d, upload(hw, {d}), 1e-6f);
  for (int64_t t = 0; t < T; ++t)
    ops::rms_norm(xh.data() + t * stride + d, d, hw.data(), xh.data() + t * stride + d, d, heads, d, 1e-6f);
  EXPECT_LE(max_rel_diff(download(dev), xh), 1e-5) << "head_rms_norm T 5 heads 3 d 32";
}

// The residual add fused into the norm gives bit for bit what the two ops give (x updated on the
// normed rows only), for every add dtype and for 16-byte and single-float rows, in either launch order.
TEST(CudaRuntimeOps, AddRmsNormEqualsAddThenNorm) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 5;
  for (const bool next_first : {false, true})
    for (const int64_t width : {96, 4095, 4096})
      for (DType add_type : {DType::F32, DType::F16, DType::BF16}) {
        const std::vector<float> x = random_floats(static_cast<size_t>(T * width), 31, 3.0f);
        const std::vector<float> a = random_floats(static_cast<size_t>(T * width), 32, 2.0f);
        const std::vector<float> w = random_floats(static_cast<size_t>(width), 33);
        const Tensor add = Tensor::from_vector(a, {T, width}).to(add_type).to_device(kGpu);
        const Tensor weight = upload(w, {width});
        Tensor fused_x = upload(x, {T, width});
        const Tensor fused = ops::cu::add_rms_norm(fused_x, add, 3, 2, weight, 1e-6f, DType::BF16, next_first);
        Tensor two_x = upload(x, {T, width});
        ops::cu::add_residual(two_x, add);
        const Tensor two = ops::cu::rms_norm(two_x, 3, 2, weight, 1e-6f, DType::BF16);
        const std::string what = "width " + std::to_string(width) + " add " + std::string(dtype_name(add_type)) +
                                 (next_first ? " next first" : "");
        const std::vector<float> got_y = download(fused), want_y = download(two);
        const std::vector<float> got_x = download(fused_x), want_x = download(two_x);
        EXPECT_EQ(got_y, want_y) << what;
        EXPECT_TRUE(std::equal(got_x.begin() + 3 * width, got_x.end(), want_x.begin() + 3 * width)) << what;
        EXPECT_TRUE(std::equal(got_x.begin(), got_x.begin() + 3 * width, x.begin())) << what << ": rows 0..2 untouched";
      }
}

// The form that holds a row in registers (one to four float4s a thread) gives the general loop's bits: y, and with
// the residual add x too, for widths at and between the float4 counts (4100 and 5120: two a thread, the second
// partly past the row; 12288: three, in the four-float4 kernel), past them (16400: both forms are the loop), with
// every add dtype, F32 and BF16 outputs, and the per-head form (groups of one row).
TEST(CudaRuntimeOps, RmsNormRegisterFormEqualsLoop) {
  SKIP_WITHOUT_GPU();
  struct Restore {
    ~Restore() { ops::cu::set_rms_norm_registers(-1); }
  } restore;
  const int64_t T = 3;
  const auto run = [&](int registers, int64_t width, std::optional<DType> add_type, DType out) {
    ops::cu::set_rms_norm_registers(registers);
    const std::vector<float> x = random_floats(static_cast<size_t>(T * width), 41, 3.0f);
    const std::vector<float> w = random_floats(static_cast<size_t>(width), 43);
    Tensor dx = upload(x, {T, width});
    Tensor y;
    if (add_type) {
      const Tensor add = Tensor::from_vector(random_floats(x.size(), 42, 2.0f), {T, width}).to(*add_type);
      y = ops::cu::add_rms_norm(dx, add.to_device(kGpu), 0, T, upload(w, {width}), 1e-6f, out);
    } else {
      y = ops::cu::rms_norm(dx, 0, T, upload(w, {width}), 1e-6f, out);
    }
    return std::make_pair(download(y), download(dx));
  };
  for (const int64_t width : {96, 4096, 4100, 5120, 8192, 12288, 16384, 16400})
    for (const std::optional<DType> add_type :
         {std::optional<DType>{}, std::optional<DType>{DType::F32}, std::optional<DType>{DType::BF16}})
      for (const DType out : {DType::F32, DType::BF16}) {
        const std::string what = "width " + std::to_string(width) + " add " +
                                 (add_type ? std::string(dtype_name(*add_type)) : std::string("none")) + " out " +
                                 std::string(dtype_name(out));
        const auto [y_reg, x_reg] = run(1, width, add_type, out);
        const auto [y_loop, x_loop] = run(0, width, add_type, out);
        EXPECT_EQ(y_reg, y_loop) << what;
        EXPECT_EQ(x_reg, x_loop) << what;
        EXPECT_TRUE(std::all_of(y_reg.begin(), y_reg.end(), [](float v) { return std::isfinite(v); })) << what;
      }
  // Per-head norms (groups > 1 of one row each): heads of 128 and 256.
  for (const int64_t d : {128, 256}) {
    const int64_t heads = 5, stride = heads * d + 64;
    const std::vector<float> xh = random_floats(static_cast<size_t>(T * stride), 44, 2.0f);
    const std::vector<float> hw = random_floats(static_cast<size_t>(d), 45);
    std::vector<float> got[2];
    for (const int registers : {1, 0}) {
      ops::cu::set_rms_norm_registers(registers);
      Tensor dev = upload(xh, {T, stride});
      ops::cu::head_rms_norm(dev, 64, heads, d, upload(hw, {d}), 1e-6f);
      got[registers] = download(dev);
    }
    EXPECT_EQ(got[1], got[0]) << "head_rms_norm d " << d;
    EXPECT_NE(got[1], xh) << "head_rms_norm d " << d << " changed nothing";
  }
}

TEST(CudaRuntimeOps, RotaryMatchesCpu) {
  SKIP_WITHOUT_GPU();
  ops::RopeParams p;
  p.head_dim = 32;
  p.rotary_dim = 24;  // partial: features 24..31 pass through
  const std::vector<int64_t> positions = {7, 8, 9, 10};
  const ops::RopeAngles angles = ops::rope_angles(p, positions);
  const int64_t T = 4, heads = 3, stride = 5 * 32;
  std::vector<float> x = random_floats(static_cast<size_t>(T * stride), 5);
  Tensor dev = upload(x, {T, stride});
  const ops::cu::DeviceRope rope = ops::cu::upload_rope(angles, T, kGpu);
  ops::cu::apply_rope(rope, dev, 2 * 32, heads, 32);
  ops::apply_rope(angles, x.data() + 2 * 32, T, stride, heads, 32);
  EXPECT_LE(max_rel_diff(download(dev), x), 1e-5) << "rotary rotary_dim 24 head_dim 32 at column 64";
}

// prepare_attention (one kernel) against the separate ops it replaces: to_f32, the q / k head norms,
// rotary and the cache write, for BF16 / F16 / F32 qkv, every cache storage type, with and without the
// per-head norm, full and partial rotary, a head size that is not a multiple of 32, and a graph-style
// device slot. The same queries and stored cache bytes (rotary rounds every product and sum in both),
// up to a last-bit difference of a norm's inverse.
TEST(CudaRuntimeOps, PrepareAttentionEqualsSeparateOps) {
  SKIP_WITHOUT_GPU();
  const int64_t heads = 6, kv_heads = 2, T = 5, past = 3;
  for (const int64_t d : {int64_t{64}, int64_t{40}})
    for (const int64_t rotary : {d, d / 2})
      for (const bool norm : {false, true})
        for (DType act : {DType::BF16, DType::F16, DType::F32})
          for (ops::KvDType kv : {ops::KvDType::F32, ops::KvDType::BF16, ops::KvDType::F8E4M3}) {
            const std::string what = "d " + std::to_string(d) + " rotary " + std::to_string(rotary) +
                                     (norm ? " norm" : "") + " act " + std::string(dtype_name(act)) + " kv " +
                                     ops::kv_dtype_name(kv);
            const int64_t stride = (heads + 2 * kv_heads) * d;
            ops::RopeParams rp;
            rp.head_dim = d;
            rp.rotary_dim = rotary;
            std::vector<int64_t> positions(T);
            for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = past + t;
            const ops::cu::DeviceRope rope = ops::cu::upload_rope(ops::rope_angles(rp, positions), T, kGpu);
            const Tensor qkv =
                Tensor::from_vector(random_floats(static_cast<size_t>(T * stride), 31, 2.0f), {T, stride})
                    .to(act)
                    .to_device(kGpu);
            Tensor q_norm, k_norm;
            if (norm) {
              q_norm = upload(random_floats(static_cast<size_t>(d), 32), {d});
              k_norm = upload(random_floats(static_cast<size_t>(d), 33), {d});
            }
            const float eps = 1e-6f;
            // Fused first (with F32 activations the separate ops below rotate qkv itself in place), the first
            // slot read from the device.
            ops::cu::DeviceKvCache got_cache(kGpu, 1, kv_heads, d, {kv});
            got_cache.set_scales(0, 0.5f, 4.0f);
            got_cache.reserve(past + T);
            const Tensor slot =
                Tensor::from_vector(std::vector<int32_t>{static_cast<int32_t>(past)}, {1}).to_device(kGpu);
            const Tensor q = ops::cu::prepare_attention(qkv, heads, kv_heads, d, rope, q_norm, k_norm, eps, got_cache,
                                                        0, past, slot.data<int32_t>());
            // Separate ops, the model's order before the fused kernel.
            ops::cu::DeviceKvCache want_cache(kGpu, 1, kv_heads, d, {kv});
            want_cache.set_scales(0, 0.5f, 4.0f);
            want_cache.reserve(past + T);
            Tensor wide = ops::cu::to_f32(qkv);
            if (norm) {
              ops::cu::head_rms_norm(wide, 0, heads, d, q_norm, eps);
              ops::cu::head_rms_norm(wide, heads * d, kv_heads, d, k_norm, eps);
            }
            ops::cu::apply_rope(rope, wide, 0, heads + kv_heads, d);
            want_cache.write(0, past, wide, heads * d, (heads + kv_heads) * d);
            const std::vector<float> wide_h = download(wide);
            std::vector<float> want_q;
            for (int64_t t = 0; t < T; ++t)
              want_q.insert(want_q.end(), wide_h.begin() + t * stride, wide_h.begin() + t * stride + heads * d);
            ASSERT_EQ(q.shape(), (Shape{T, heads * d})) << what;
            EXPECT_LE(max_rel_diff(download(q), want_q), 1e-6) << what;
            for (const bool v_side : {false, true}) {
              const Tensor& got = v_side ? got_cache.v(0) : got_cache.k(0);
              const Tensor& want = v_side ? want_cache.v(0) : want_cache.k(0);
              const std::vector<float> g = download(got.narrow(0, past, T)), w = download(want.narrow(0, past, T));
              // Identical bytes unless a norm's inverse differs in its last bit (its double sum is ordered
              // differently): then one step of the storage type at most.
              const double tolerance = !norm                        ? 0.0
                                       : kv == ops::KvDType::F8E4M3 ? 0.08
                                       : kv == ops::KvDType::BF16   ? 8e-3
                                                                    : 1e-6;
              EXPECT_LE(max_rel_diff(g, w), tolerance) << what << (v_side ? " v" : " k") << " rows";
            }
          }
}

TEST(CudaRuntimeOps, SiluMulEmbeddingResidual) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 3, width = 40;
  const std::vector<float> gu = random_floats(static_cast<size_t>(rows * 2 * width), 6, 2.0f);
  std::vector<float> want(static_cast<size_t>(rows * width));
  ops::silu_and_mul(gu.data(), want.data(), rows, width);
  for (DType act : {DType::F32, DType::F16, DType::BF16}) {
    const Tensor in = Tensor::from_vector(gu, {rows, 2 * width}).to(act).to_device(kGpu);
    EXPECT_LE(max_rel_diff(download(ops::cu::silu_and_mul(in)), want), 2 * tolerance_of(act))
        << "silu_and_mul " << dtype_name(act);
  }
  const int64_t vocab = 10, hidden = 24;
  const std::vector<float> table = random_floats(static_cast<size_t>(vocab * hidden), 7);
  const std::vector<int32_t> ids = {3, 0, 9, 3};
  for (DType td : {DType::F32, DType::F16, DType::BF16}) {
    const Tensor dev_table = Tensor::from_vector(table, {vocab, hidden}).to(td).to_device(kGpu);
    const std::vector<float> host_table = Tensor::from_vector(table, {vocab, hidden}).to(td).to_float_vector();
    std::vector<float> rows_want;
    for (int32_t id : ids)
      rows_want.insert(rows_want.end(), host_table.begin() + id * hidden, host_table.begin() + (id + 1) * hidden);
    Tensor x = ops::cu::embedding(dev_table, ids, DType::F32);
    EXPECT_EQ(download(x), rows_want) << "embedding table " << dtype_name(td);
    // x += y with y in BF16.
    const std::vector<float> y = random_floats(rows_want.size(), 8);
    const Tensor ydev = Tensor::from_vector(y, {4, hidden}).to(DType::BF16).to_device(kGpu);
    const std::vector<float> yb = Tensor::from_vector(y, {4, hidden}).to(DType::BF16).to_float_vector();
    ops::cu::add_residual(x, ydev);
    for (size_t i = 0; i < rows_want.size(); ++i) rows_want[i] += yb[i];
    EXPECT_EQ(download(x), rows_want) << "add_residual after embedding table " << dtype_name(td);
  }
}

// qkv rows [T, (heads + 2·kv_heads)·d] written to both caches, then attention of the last T
// tokens at past = total - T. One token after 1000 (capacity 2000) takes the chunked decode form:
// eight chunks of 256 slots, the last four empty, and with a window of 300 the first two too.
TEST(CudaRuntimeOps, KvCacheAndAttentionMatchCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t heads = 4, kv_heads = 2, d = 32, stride = (heads + 2 * kv_heads) * d;
  EXPECT_EQ(ops::cu::attention_chunks(1, 2000), 8);
  EXPECT_EQ(ops::cu::attention_chunks(1, 256), 0);
  EXPECT_EQ(ops::cu::attention_chunks(2, 2000), 0);
  for (ops::KvDType kv : {ops::KvDType::F32, ops::KvDType::F16, ops::KvDType::BF16})
    for (int64_t window : {int64_t{0}, int64_t{5}, int64_t{300}})
      for (const auto& [first, second] :
           {std::pair<int64_t, int64_t>{37, 1}, {10, 29}, {0, 300}, {1000, 1}}) {
        const std::string what = std::string("kv ") + ops::kv_dtype_name(kv) + " window " + std::to_string(window) +
                                 " tokens " + std::to_string(first) + "+" + std::to_string(second);
        ops::KvCache host(1, kv_heads, d, {kv});
        ops::cu::DeviceKvCache dev(kGpu, 1, kv_heads, d, {kv});
        host.set_scales(0, 0.5f, 2.0f);
        dev.set_scales(0, 0.5f, 2.0f);
        const ops::AttentionParams p{.heads = heads, .kv_heads = kv_heads, .head_dim = d,
                                     .scale = 1.0f / std::sqrt(32.0f), .sliding_window = window};
        std::vector<float> want, got;
        int64_t past = 0;
        for (const int64_t T : {first, second}) {
          if (T == 0) continue;
          const std::vector<float> qkv = random_floats(static_cast<size_t>(T * stride), static_cast<uint32_t>(past + 9), 1.5f);
          host.reserve(past + T);
          dev.reserve(past + T);  // grows from the first chunk's capacity, keeping its slots
          host.write(0, past, qkv.data() + heads * d, qkv.data() + (heads + kv_heads) * d, T, stride);
          const Tensor qkv_dev = upload(qkv, {T, stride});
          dev.write(0, past, qkv_dev, heads * d, (heads + kv_heads) * d);
          std::vector<float> out(static_cast<size_t>(T * heads * d));
          ops::attention(qkv.data(), stride, T, past, host, 0, p, out.data(), heads * d);
          want = out;
          got = download(ops::cu::attention(qkv_dev, past, dev, 0, p, DType::F32));
          host.commit(T);
          dev.commit(T);
          past += T;
        }
        EXPECT_EQ(dev.length(), host.length()) << what;
        EXPECT_LE(max_rel_diff(got, want), 1e-5) << what << " (last chunk)";
      }
}

// Puts the lanes form back under its rule when a test that forces it ends.
struct LanesModeReset {
  ~LanesModeReset() { ops::cu::set_attention_lanes(-1); }
};

struct DecodeCase {
  int64_t heads, kv_heads, d;
};

// One decode token against past + 1 rows of random q / k / v (seed), held in a host cache and in a device cache
// reserved for `capacity` slots (kv scales set where given): the CPU result, the GPU result, the form the GPU ran
// (ops::cu::attention_form) and the device cache's capacity.
struct DecodeRun {
  std::vector<float> want, got;
  std::string form;
  int64_t capacity = 0;
};
DecodeRun run_decode_attention(const DecodeCase& c, ops::KvDType kv, int64_t past, int64_t window, int64_t capacity,
                               uint32_t seed, std::optional<std::pair<float, float>> kv_scales) {
  const int64_t stride = (c.heads + 2 * c.kv_heads) * c.d;
  ops::KvCache host(1, c.kv_heads, c.d, {kv});
  ops::cu::DeviceKvCache dev(kGpu, 1, c.kv_heads, c.d, {kv});
  if (kv_scales) {
    host.set_scales(0, kv_scales->first, kv_scales->second);
    dev.set_scales(0, kv_scales->first, kv_scales->second);
  }
  const ops::AttentionParams p{.heads = c.heads,
                               .kv_heads = c.kv_heads,
                               .head_dim = c.d,
                               .scale = 1.0f / std::sqrt(static_cast<float>(c.d)),
                               .sliding_window = window};
  const int64_t total = past + 1;
  const std::vector<float> qkv = random_floats(static_cast<size_t>(total * stride), seed, 1.5f);
  host.reserve(total);
  dev.reserve(capacity);
  host.write(0, 0, qkv.data() + c.heads * c.d, qkv.data() + (c.heads + c.kv_heads) * c.d, total, stride);
  dev.write(0, 0, upload(qkv, {total, stride}), c.heads * c.d, (c.heads + c.kv_heads) * c.d);
  // The query is the last row's q.
  const std::vector<float> last_row(qkv.end() - stride, qkv.end());
  DecodeRun r;
  r.want.resize(static_cast<size_t>(c.heads * c.d));
  ops::attention(last_row.data(), stride, 1, past, host, 0, p, r.want.data(), c.heads * c.d);
  r.got = download(ops::cu::attention(upload(last_row, {1, stride}), past, dev, 0, p, DType::F32));
  r.form = ops::cu::attention_form(1, past, dev, p);
  r.capacity = dev.capacity();
  return r;
}

// A single decode token over every group size the per-group decode kernel serves (1, 2, 4, 6, 7, 8 query
// heads per kv head), one it leaves to the per-(token, head) form (16), head sizes of whole vectors (64,
// 128, 256) and one that is not for the 16-bit caches (20: five F32 vectors, 2.5 BF16 ones), with the
// cache within one chunk (capacity <= 256: the block writes the output) and past it (chunks and the
// combine kernel), a sliding window, and the first token of a sequence (one visible slot). Within one chunk the
// lanes form splits groups of 6 and 8 heads over two blocks (decode_lanes_splits), and a capacity of 101 or 256
// slots over clusters of 2-8 blocks (decode_lanes_parts: by head size and cache type; past 255 with a window of 40
// leaves the cluster's first blocks without a visible slot).
// Each case runs under the rule (attention_lanes_by_rule), with the lanes form off and with it on wherever
// it fits (chunked caches included).
TEST(CudaRuntimeOps, DecodeAttentionGroupsAndHeadSizes) {
  SKIP_WITHOUT_GPU();
  LanesModeReset reset_lanes;
  for (const int lanes : {-1, 0, 1})
    for (const DecodeCase c :
         {DecodeCase{8, 8, 64}, DecodeCase{16, 4, 128}, DecodeCase{7, 1, 128}, DecodeCase{16, 2, 256},
          DecodeCase{16, 1, 64}, DecodeCase{4, 2, 20}, DecodeCase{16, 2, 128}, DecodeCase{12, 2, 64}})
      for (ops::KvDType kv : {ops::KvDType::F32, ops::KvDType::BF16, ops::KvDType::F16})
        for (const auto& [past, window] :
             {std::pair<int64_t, int64_t>{0, 0}, {100, 0}, {255, 0}, {255, 40}, {700, 0}, {700, 130}}) {
          ops::cu::set_attention_lanes(lanes);
          const std::string what = "heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " d " +
                                   std::to_string(c.d) + " kv " + ops::kv_dtype_name(kv) + " past " +
                                   std::to_string(past) + " window " + std::to_string(window) + " lanes " +
                                   std::to_string(lanes);
          const int64_t total = past + 1;
          const DecodeRun r = run_decode_attention(c, kv, past, window, total, static_cast<uint32_t>(total + c.d),
                                                   std::pair{0.75f, 1.5f});
          const bool chunked = ops::cu::attention_chunks(1, r.capacity) > 0;
          EXPECT_EQ(chunked, r.capacity > 256) << what;
          const bool lanes_fit = c.heads / c.kv_heads <= 8 && c.heads / c.kv_heads * c.d <= 1024 &&
                                 c.d % (kv == ops::KvDType::F32 ? 4 : 8) == 0 && env_switch_on("QLM_ATTENTION_DECODE");
          if (lanes_fit && (lanes >= 0 || std::getenv("QLM_ATTENTION_LANES") == nullptr)) {
            const bool want_lanes =
                lanes == 1 ||
                (lanes == -1 && ops::cu::attention_lanes_by_rule(ops::cu::attention_chunks(1, r.capacity)));
            EXPECT_EQ(r.form == "decode lanes", want_lanes) << what;
          }
          EXPECT_LE(max_rel_diff(r.got, r.want), 1e-5) << what;
        }
}

// Caches larger than their contents (the model's capacity doubles as it grows): blocks of chunks past the last
// slot or before a sliding window return at once and the combine reads only the chunks with visible slots; at
// 80000 slots 4 and 8 kv heads give more than twice as many blocks as the GPU has multiprocessors, so the paired
// decode form (two blocks per multiprocessor, V loaded after the scores) runs for groups of 4 and of 8.
//
// With the lanes form forced on (it fits every case's group here) it serves the chunked caches too.
TEST(CudaRuntimeOps, DecodeAttentionInLargerCaches) {
  SKIP_WITHOUT_GPU();
  LanesModeReset reset_lanes;
  for (const int lanes : {-1, 1})
    for (const DecodeCase c : {DecodeCase{16, 4, 128}, DecodeCase{64, 8, 128}, DecodeCase{7, 1, 64},
                               DecodeCase{4, 2, 20}})  // d 20: per-head form
      for (ops::KvDType kv : {ops::KvDType::F32, ops::KvDType::BF16, ops::KvDType::F8E4M3})
        for (const int64_t capacity : {int64_t{1500}, int64_t{80000}})
          for (const auto& [past, window] : {std::pair<int64_t, int64_t>{300, 0}, {1400, 0}, {1400, 600}}) {
            if (capacity == 80000 && c.kv_heads != 4 && c.kv_heads != 8) continue;
            ops::cu::set_attention_lanes(lanes);
            const std::string what = "heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " kv " +
                                     ops::kv_dtype_name(kv) + " capacity " + std::to_string(capacity) + " past " +
                                     std::to_string(past) + " window " + std::to_string(window) + " lanes " +
                                     std::to_string(lanes);
            const DecodeRun r = run_decode_attention(c, kv, past, window, capacity,
                                                     static_cast<uint32_t>(past + 1 + capacity), std::nullopt);
            EXPECT_EQ(r.capacity, capacity) << what;
            const bool per_head = c.d % (kv == ops::KvDType::F32 ? 4 : 8) != 0  // rows are not whole vectors
                                  || !env_switch_on("QLM_ATTENTION_DECODE");
            EXPECT_EQ(r.form, per_head            ? "per-head chunked"
                              : lanes == 1        ? "decode lanes"
                              : capacity == 80000 ? "decode paired"
                                                  : "decode")
                << what;
            EXPECT_LE(max_rel_diff(r.got, r.want), 1e-5) << what;
          }
}

// The rule of launch_attention's kernels (host-only: runs without a GPU).
TEST(AttentionFormRule, FormsByShapeCapacityAndMultiprocessors) {
  if (!env_switch_on("QLM_ATTENTION_DECODE")) GTEST_SKIP() << "QLM_ATTENTION_DECODE=0 turns the decode forms off";
  if (std::getenv("QLM_ATTENTION_LANES") != nullptr) GTEST_SKIP() << "QLM_ATTENTION_LANES overrides the rule";
  const auto form = [](int64_t tokens, int64_t heads, int64_t kv_heads, int64_t d, ops::cu::ElemType kv,
                       int64_t slots_bound, int sm_count) {
    ops::cu::AttentionArgs a;
    a.tokens = tokens;
    a.heads = heads;
    a.kv_heads = kv_heads;
    a.head_dim = d;
    a.kv_type = kv;
    a.past = slots_bound - 1;
    a.slots_bound = slots_bound;
    a.sm_count = sm_count;
    a.chunks = ops::cu::attention_chunks(tokens, slots_bound);
    a.split_slots = a.chunks > 0 ? ops::cu::kAttentionChunkSlots : 0;
    return std::string(ops::cu::attention_form_name(ops::cu::attention_form(a)));
  };
  using ops::cu::ElemType;
  EXPECT_EQ(form(5, 32, 8, 128, ElemType::BF16, 100, 132), "per-head");  // prefill
  // The lanes form where the rule has it (attention_lanes_by_rule), else the decode form.
  const auto decode_at = [](int64_t chunks) -> std::string {
    return ops::cu::attention_lanes_by_rule(chunks) ? "decode lanes" : "decode";
  };
  EXPECT_EQ(form(1, 32, 8, 128, ElemType::BF16, 100, 132), decode_at(0));          // one chunk
  EXPECT_EQ(form(1, 64, 8, 128, ElemType::BF16, 256, 132), decode_at(0));          // 8 x 128 features
  EXPECT_EQ(form(1, 64, 8, 256, ElemType::BF16, 100, 132), "decode");              // 8 x 256 > 1024
  EXPECT_EQ(form(1, 32, 8, 128, ElemType::BF16, 257, 132), decode_at(2));          // chunked: 2 chunks
  EXPECT_EQ(form(1, 32, 8, 128, ElemType::BF16, 1024, 132), decode_at(4));         // 4 chunks
  EXPECT_EQ(form(1, 32, 8, 128, ElemType::BF16, 1025, 132), decode_at(5));         // 5 chunks
  EXPECT_EQ(form(1, 32, 8, 128, ElemType::BF16, 4097, 132), "decode");             // 17 x 8 = 136 blocks
  EXPECT_EQ(form(1, 32, 8, 128, ElemType::BF16, 34 * 256, 132), "decode paired");  // 272 > 264 blocks
  EXPECT_EQ(form(1, 32, 8, 128, ElemType::BF16, 33 * 256, 132), "decode");         // 264: not more than twice
  EXPECT_EQ(form(1, 32, 8, 128, ElemType::BF16, 34 * 256, 0), "decode");           // SM count unknown
  EXPECT_EQ(form(1, 64, 8, 128, ElemType::F8E4M3, 80000, 132), "decode paired");   // group of 8
  EXPECT_EQ(form(1, 32, 2, 128, ElemType::BF16, 4097, 132), "per-head chunked");   // group of 16
  EXPECT_EQ(form(1, 32, 2, 128, ElemType::BF16, 200, 132), "per-head");
  EXPECT_EQ(form(1, 4, 2, 20, ElemType::F32, 1500, 132), "decode");             // 20 = 5 vectors of 4
  EXPECT_EQ(form(1, 4, 2, 20, ElemType::BF16, 1500, 132), "per-head chunked");  // not whole vectors of 8
  LanesModeReset reset_lanes;
  ops::cu::set_attention_lanes(1);  // wherever it fits
  EXPECT_EQ(form(1, 32, 8, 128, ElemType::BF16, 100, 132), "decode lanes");
  EXPECT_EQ(form(1, 64, 8, 128, ElemType::BF16, 256, 132), "decode lanes");
  EXPECT_EQ(form(1, 32, 8, 128, ElemType::BF16, 4097, 132), "decode lanes");
  EXPECT_EQ(form(1, 64, 8, 256, ElemType::BF16, 4097, 132), "decode");
  EXPECT_EQ(form(5, 32, 8, 128, ElemType::BF16, 100, 132), "per-head");
  EXPECT_EQ(form(1, 4, 2, 20, ElemType::BF16, 1500, 132), "per-head chunked");
  ops::cu::set_attention_lanes(0);
  EXPECT_EQ(form(1, 32, 8, 128, ElemType::BF16, 100, 132), "decode");
  ops::cu::set_attention_lanes(-1);
  ops::cu::AttentionArgs graph_step;  // bound unknown, past on the device: only the per-head form is safe
  graph_step.tokens = 1;
  graph_step.heads = 32;
  graph_step.kv_heads = 8;
  graph_step.head_dim = 128;
  graph_step.kv_type = ElemType::BF16;
  int32_t past_slot = 0;
  graph_step.past_dev = &past_slot;
  EXPECT_EQ(ops::cu::attention_form(graph_step), ops::cu::AttentionForm::PerHead);
}

// The lanes form's blocks per chunk (host-only): enough that none streams more than 4 block steps of 8 warps.
TEST(AttentionFormRule, LanesPartsBySlotsABlockMaySee) {
  if (std::getenv("QLM_ATTENTION_LANES_PARTS") != nullptr)
    GTEST_SKIP() << "QLM_ATTENTION_LANES_PARTS overrides the rule";
  using ops::cu::ElemType;
  const auto parts = [](int64_t d, ElemType kv, int64_t slots_bound, int64_t chunks) {
    ops::cu::AttentionArgs a;
    a.tokens = 1;
    a.heads = 32;
    a.kv_heads = 8;
    a.head_dim = d;
    a.kv_type = kv;
    a.past = slots_bound - 1;
    a.slots_bound = slots_bound;
    return ops::cu::decode_lanes_parts(a, chunks);
  };
  // BF16, d 128: 16 vectors a row, 16 lanes a slot, 16 slots a block step, 64 slots a block.
  EXPECT_EQ(parts(128, ElemType::BF16, 17, 0), 1);
  EXPECT_EQ(parts(128, ElemType::BF16, 64, 0), 1);
  EXPECT_EQ(parts(128, ElemType::BF16, 65, 0), 2);
  EXPECT_EQ(parts(128, ElemType::BF16, 144, 0), 3);
  EXPECT_EQ(parts(128, ElemType::BF16, 256, 0), 4);
  EXPECT_EQ(parts(128, ElemType::BF16, 4097, 17), 4);  // a chunk of 256 slots whatever the capacity
  // BF16, d 64: 8 lanes a slot, 32 slots a step, 128 a block; F32, d 128: 32 lanes, 8 slots a step, 32 a block.
  EXPECT_EQ(parts(64, ElemType::BF16, 256, 0), 2);
  EXPECT_EQ(parts(128, ElemType::F32, 101, 0), 4);
  EXPECT_EQ(parts(128, ElemType::F32, 256, 0), ops::cu::kLanesMaxParts);
  // Without a bound, past + 1 slots (past on the host).
  ops::cu::AttentionArgs host_past;
  host_past.tokens = 1;
  host_past.heads = 32;
  host_past.kv_heads = 8;
  host_past.head_dim = 128;
  host_past.kv_type = ElemType::BF16;
  host_past.past = 99;
  EXPECT_EQ(ops::cu::decode_lanes_parts(host_past, 0), 2);
}

TEST(CudaRuntimeOps, AttentionOutputInActDtype) {
  SKIP_WITHOUT_GPU();
  const int64_t heads = 2, kv_heads = 1, d = 64, stride = (heads + 2 * kv_heads) * d, T = 6;
  const std::vector<float> qkv = random_floats(static_cast<size_t>(T * stride), 21);
  ops::KvCache host(1, kv_heads, d);
  host.reserve(T);
  host.write(0, 0, qkv.data() + heads * d, qkv.data() + (heads + kv_heads) * d, T, stride);
  const ops::AttentionParams p{.heads = heads, .kv_heads = kv_heads, .head_dim = d, .scale = 0.125f,
                               .sliding_window = 0};
  std::vector<float> want(static_cast<size_t>(T * heads * d));
  ops::attention(qkv.data(), stride, T, 0, host, 0, p, want.data(), heads * d);
  for (DType out : {DType::F16, DType::BF16}) {
    ops::cu::DeviceKvCache dev(kGpu, 1, kv_heads, d);
    dev.reserve(T);
    const Tensor qkv_dev = upload(qkv, {T, stride});
    dev.write(0, 0, qkv_dev, heads * d, (heads + kv_heads) * d);
    const Tensor got = ops::cu::attention(qkv_dev, 0, dev, 0, p, out);
    EXPECT_EQ(got.dtype(), out);
    EXPECT_LE(max_rel_diff(download(got), want), tolerance_of(out)) << "attention out " << dtype_name(out);
  }
}

// The last kernel of a CUDA-graph decode step: the token runtime::argmax takes (the first of tied maxima, NaN
// never, 0 when every logit is NaN) for vocabularies of 1 to 151936 ids with ties, NaN, infinities; the slot moved
// on by one and its angles copied from the table (left as they were past the table's last row). The table's rows
// are rope_angles of each single position, dynamic scaling past max_position_embeddings included.
TEST(CudaRuntimeOps, DecodeAdvanceTakesArgmaxAndNextAngles) {
  SKIP_WITHOUT_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  ops::RopeParams rope;
  rope.type = ops::RopeType::Dynamic;
  rope.head_dim = rope.rotary_dim = 16;
  rope.factor = 2.0;
  rope.max_position_embeddings = 8;
  const int64_t rows = 20, half = 8;
  const Tensor table = ops::cu::rope_table(rope, rows, kGpu);
  const std::vector<float> table_host = download(table);
  for (int64_t p = 0; p < rows; ++p) {
    const ops::RopeAngles a = ops::rope_angles(rope, std::span<const int64_t>(&p, 1));
    for (int64_t i = 0; i < half; ++i) {
      ASSERT_EQ(table_host[p * 2 * half + i], a.cos[i]) << "row " << p;
      ASSERT_EQ(table_host[p * 2 * half + half + i], a.sin[i]) << "row " << p;
    }
  }
  uint32_t seed = 40;
  for (const int64_t vocab : {1, 5, 1000, 4097, 128256, 151936})
    for (int variant = 0; variant < 6; ++variant) {
      std::vector<float> logits = random_floats(static_cast<size_t>(vocab), ++seed, 3.0f);
      std::mt19937 rng(seed);
      std::uniform_int_distribution<int64_t> at(0, vocab - 1);
      if (variant == 1)  // the maximum three times: the first wins
        for (int k = 0; k < 3; ++k) logits[static_cast<size_t>(at(rng))] = 100.0f;
      if (variant == 2) {  // NaN first and scattered, +inf twice
        logits[0] = nan;
        for (int k = 0; k < 50; ++k) logits[static_cast<size_t>(at(rng))] = nan;
        logits[static_cast<size_t>(at(rng))] = inf;
        logits[static_cast<size_t>(at(rng))] = inf;
      }
      if (variant == 3) std::fill(logits.begin(), logits.end(), nan);
      if (variant == 4) std::fill(logits.begin(), logits.end(), -inf);
      if (variant == 5) {  // -0 and +0 tied as the maximum
        std::fill(logits.begin(), logits.end(), -1.0f);
        logits[static_cast<size_t>(vocab - 1)] = 0.0f;
        logits[static_cast<size_t>(vocab / 2)] = -0.0f;
      }
      const int32_t want = runtime::argmax(logits);
      for (const int32_t slot : {3, 12, static_cast<int32_t>(rows - 1)}) {
        const std::string what =
            "vocab " + std::to_string(vocab) + " variant " + std::to_string(variant) + " slot " + std::to_string(slot);
        ops::cu::DecodeStepInputs in = ops::cu::make_decode_step_inputs(rope, kGpu);
        const int64_t pos = slot;
        const ops::RopeAngles here = ops::rope_angles(rope, std::span<const int64_t>(&pos, 1));
        ops::cu::write_decode_step_inputs(in, 7, slot, rope);
        const Tensor device_logits = upload(logits, {1, vocab});
        std::vector<float> expect(here.cos);
        expect.insert(expect.end(), here.sin.begin(), here.sin.end());
        for (int32_t launch = 1; launch <= 2; ++launch) {  // the second launch: its blocks' count starts at 0 again
          ops::cu::decode_advance(device_logits, in, table);
          const std::vector<float> got = download(in.buffer);
          int32_t token = -1, next = -1;
          std::memcpy(&token, &got[0], sizeof(token));
          std::memcpy(&next, &got[1], sizeof(next));
          EXPECT_EQ(token, want) << what << " launch " << launch;
          EXPECT_EQ(next, slot + launch) << what << " launch " << launch;
          if (slot + launch < rows)
            expect.assign(table_host.begin() + (slot + launch) * 2 * half,
                          table_host.begin() + (slot + launch + 1) * 2 * half);
          for (int64_t i = 0; i < 2 * half; ++i)
            ASSERT_EQ(got[2 + i], expect[static_cast<size_t>(i)]) << what << " launch " << launch << " angle " << i;
          EXPECT_EQ(in.scratch.to_device(Device::cpu()).data<int32_t>()[0], 0) << what << ": the blocks' count";
        }
      }
    }
}

}  // namespace
}  // namespace qlm
#endif  // QLM_WITH_CUDA
