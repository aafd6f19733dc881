// Unquantized parallel layers at TP = 1, 2 and 4 (kv heads replicated at 4) against a float64
// reference, on an odd number of rows: column outputs are reassembled from each rank's slice,
// row-parallel outputs are all-reduced and must be identical on every rank.
#include <gtest/gtest.h>

#include <cmath>

#include "loader/loader.h"
#include "support/quantize_ref.h"
#include "support/tiny_llama.h"

namespace qlm {
namespace {

using testing::TinyLlamaSizes;

struct RankOutputs {
  Tensor qkv, o, gate_up, down;
};

// |y - ref| within fp32 rounding of the accumulation: the classic bound K * 2^-24 * sum |x_k w_k|
// for K <= 96 (any kernel, any summation order), plus the rounding of TP partial sums.
void expect_close(double y, double ref, double l1, const std::string& what) {
  EXPECT_LE(std::abs(y - ref), 1e-5 * l1) << what << ": got " << y << ", reference " << ref;
}

std::vector<double> row_l1(const testing::NamedTensors& t, const std::string& module, const std::vector<float>& x,
                           int64_t M) {
  testing::NamedTensors abs_t;
  Tensor w = testing::find_tensor(t, module + ".weight").to(DType::F64);
  for (double& v : w.span<double>()) v = std::abs(v);
  abs_t.emplace_back(module + ".weight", w);
  std::vector<float> ax(x);
  for (float& v : ax) v = std::abs(v);
  std::vector<double> r = testing::dense_reference(abs_t, module, ax, M);
  for (double& v : r) v += 1.0;  // biases
  return r;
}

class LinearTp : public ::testing::TestWithParam<std::tuple<int, DType, bool>> {};

TEST_P(LinearTp, MatchesFloat64Reference) {
  const int tp = std::get<0>(GetParam());
  const DType dtype = std::get<1>(GetParam());
  const bool bias = std::get<2>(GetParam());
  TinyLlamaSizes s{.hidden = 64, .heads = 8, .kv_heads = 2, .head_dim = 8, .intermediate = 96, .qkv_bias = bias};
  const auto tensors = testing::tiny_block_tensors(s, dtype, /*seed=*/11);
  const int64_t M = 5;
  const std::vector<float> x = testing::random_inputs(M, s.hidden, 3);
  const std::vector<float> xo = testing::random_inputs(M, s.heads * s.head_dim, 4);
  const std::vector<float> xd = testing::random_inputs(M, s.intermediate, 5);

  LocalCommGroup group(tp);
  std::vector<RankOutputs> out(static_cast<size_t>(tp));
  run_on_ranks(tp, [&](int r) {
    ModuleSet modules;
    testing::add_tiny_block(modules, s, nullptr, QuantContext{}, group.context(r), dtype);
    LoadReport report = load_tensors(tensors, modules);
    EXPECT_EQ(report.tensors_ignored, 1u);
    EXPECT_EQ(report.tensors_loaded, tensors.size() - 1);
    const std::string a = "model.layers.0.self_attn.", m = "model.layers.0.mlp.";
    auto slice = [&](const std::vector<float>& full, int64_t K) {
      const int64_t K_p = K / tp;
      std::vector<float> v;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K_p; ++k) v.push_back(full[static_cast<size_t>(i * K + r * K_p + k)]);
      return Tensor::from_vector(v, {M, K_p});
    };
    RankOutputs& o = out[static_cast<size_t>(r)];
    o.qkv = modules.linear(a + "qkv_proj").forward(Tensor::from_vector(x, {M, s.hidden}));
    o.gate_up = modules.linear(m + "gate_up_proj").forward(Tensor::from_vector(x, {M, s.hidden}));
    o.o = modules.linear(a + "o_proj").forward(slice(xo, s.heads * s.head_dim));
    o.down = modules.linear(m + "down_proj").forward(slice(xd, s.intermediate));
  });

  const std::string a = "model.layers.0.self_attn.", m = "model.layers.0.mlp.";
  const int64_t hd = s.head_dim, nh = s.heads / tp, nkv = tp >= s.kv_heads ? 1 : s.kv_heads / tp;
  const int64_t replicas = tp >= s.kv_heads ? tp / s.kv_heads : 1;
  // Column layers: rank r's columns map back to global q / k / v (or gate / up) columns.
  struct Part {
    std::string module;
    int64_t offset, size, n_src;
    bool kv;
  };
  for (const auto& [module, offset, size, n_src, kv] :
       {Part{a + "q_proj", 0, nh * hd, tp, false}, Part{a + "k_proj", nh * hd, nkv * hd, tp, true},
        Part{a + "v_proj", (nh + nkv) * hd, nkv * hd, tp, true}}) {
    const auto ref = testing::dense_reference(tensors, module, x, M);
    const auto l1 = row_l1(tensors, module, x, M);
    const int64_t N = static_cast<int64_t>(ref.size()) / M;
    for (int r = 0; r < tp; ++r) {
      const int64_t src = kv ? r / replicas : r;
      const Tensor& y = out[static_cast<size_t>(r)].qkv;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t c = 0; c < size; ++c) {
          int64_t idx[2] = {i, offset + c};
          const size_t g = static_cast<size_t>(i * N + src * size + c);
          expect_close(y.item_as_double(idx), ref[g], l1[g], module);
        }
    }
  }
  for (int part = 0; part < 2; ++part) {
    const std::string module = m + (part == 0 ? "gate_proj" : "up_proj");
    const auto ref = testing::dense_reference(tensors, module, x, M);
    const auto l1 = row_l1(tensors, module, x, M);
    const int64_t I_p = s.intermediate / tp;
    for (int r = 0; r < tp; ++r)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t c = 0; c < I_p; ++c) {
          int64_t idx[2] = {i, part * I_p + c};
          const size_t g = static_cast<size_t>(i * s.intermediate + r * I_p + c);
          expect_close(out[static_cast<size_t>(r)].gate_up.item_as_double(idx), ref[g], l1[g], module);
        }
  }
  // Row layers: the all-reduced output is complete and bit-identical on every rank.
  for (const auto& [module, which, xin] : {std::tuple{a + "o_proj", &RankOutputs::o, &xo},
                                           std::tuple{m + "down_proj", &RankOutputs::down, &xd}}) {
    const auto ref = testing::dense_reference(tensors, module, *xin, M);
    const auto l1 = row_l1(tensors, module, *xin, M);
    for (int r = 0; r < tp; ++r) {
      const Tensor& y = out[static_cast<size_t>(r)].*which;
      ASSERT_EQ(y.shape(), (Shape{M, s.hidden}));
      EXPECT_EQ(y.to_float_vector(), (out[0].*which).to_float_vector()) << module << " rank " << r;
      const auto yv = y.to_float_vector();
      for (size_t g = 0; g < ref.size(); ++g) expect_close(yv[g], ref[g], l1[g], module);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TpSizes, LinearTp,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Bool()));

// The bias of a row-parallel layer is added once (on rank 0), before the all-reduce.
TEST(LinearTpBias, RowBiasAddedOnce) {
  const int64_t K = 8, N = 4, M = 3;
  std::vector<float> w(static_cast<size_t>(N * K), 0.0f), b{1, 2, 3, 4};
  testing::NamedTensors t{{"o.weight", Tensor::from_vector(w, {N, K})}, {"o.bias", Tensor::from_vector(b, {N})}};
  for (int tp : {1, 2, 4}) {
    LocalCommGroup group(tp);
    std::vector<std::vector<float>> ys(static_cast<size_t>(tp));
    run_on_ranks(tp, [&](int r) {
      ModuleSet modules;
      modules.add_linear({.prefix = "o", .kind = LinearKind::Row, .input_size = K, .output_size = N, .bias = true},
                         nullptr, QuantContext{}, group.context(r));
      load_tensors(t, modules);
      ys[static_cast<size_t>(r)] = modules.linear("o").forward(Tensor::zeros({M, K / tp}, DType::F32)).to_float_vector();
    });
    for (const auto& y : ys)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t n = 0; n < N; ++n) EXPECT_EQ(y[static_cast<size_t>(i * N + n)], b[static_cast<size_t>(n)]);
  }
}

}  // namespace
}  // namespace qlm
