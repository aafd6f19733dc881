// Parallel linear layers (FORMATS.md §4.2-4.4): partition sizes and divisibility errors, loading by
// shard id with GQA head splits and kv-head replication, already-fused checkpoint tensors, the
// sharding of each quantized tensor kind, and the completeness check.
#include "layers/linear.h"

#include <gtest/gtest.h>

#include "support/expect_error.h"
#include "support/test_methods.h"

namespace qlm {
namespace {

using testing::declare;
using testing::DeclareOnlyConfig;

// F32 [rows, cols] with value 1000*r + c.
Tensor grid(int64_t rows, int64_t cols, DType dtype = DType::F32, int64_t base = 0) {
  std::vector<float> v;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) v.push_back(static_cast<float>(base + 1000 * r + c));
  return Tensor::from_vector(v, {rows, cols}).to(dtype);
}

double at(const Tensor& t, int64_t r, int64_t c) {
  int64_t idx[2] = {r, c};
  return t.item_as_double(idx);
}

QuantContext cpu() { return QuantContext{}; }

LinearSpec qkv_spec(int64_t hidden, int64_t heads, int64_t kv, int64_t hd) {
  LinearSpec s{.prefix = "l.qkv_proj", .kind = LinearKind::QKV, .input_size = hidden};
  s.head_size = hd;
  s.total_num_heads = heads;
  s.total_num_kv_heads = kv;
  return s;
}

TEST(LinearLayer, PartitionSizes) {
  LinearLayer col({.prefix = "c", .kind = LinearKind::Column, .input_size = 8, .output_size = 12}, nullptr, cpu(),
                  {.rank = 1, .size = 4, .comm = nullptr});
  EXPECT_EQ(col.output_size_per_partition(), 3);
  EXPECT_EQ(col.param("weight").shape(), (Shape{3, 8}));
  LinearLayer row({.prefix = "r", .kind = LinearKind::Row, .input_size = 12, .output_size = 8, .bias = true},
                  nullptr, cpu(), {.rank = 0, .size = 4, .comm = nullptr});
  EXPECT_EQ(row.input_size_per_partition(), 3);
  EXPECT_EQ(row.param("bias").shape(), (Shape{8}));
  EXPECT_EQ(row.param("bias").kind(), ParamKind::Replicated);
  LinearSpec merged{.prefix = "m", .kind = LinearKind::MergedColumn, .input_size = 8};
  merged.output_sizes = {16, 8};
  LinearLayer m(merged, nullptr, cpu(), {.rank = 0, .size = 2, .comm = nullptr});
  EXPECT_EQ(m.output_partition_sizes(), (std::vector<int64_t>{8, 4}));
  // GQA: 8 q heads, 2 kv heads.
  for (int tp : {1, 2, 4, 8}) {
    LinearLayer qkv(qkv_spec(64, 8, 2, 8), nullptr, cpu(), {.rank = 0, .size = tp, .comm = nullptr});
    EXPECT_EQ(qkv.num_heads(), 8 / tp);
    EXPECT_EQ(qkv.num_kv_heads(), tp >= 2 ? 1 : 2);
    EXPECT_EQ(qkv.num_kv_head_replicas(), tp > 2 ? tp / 2 : 1);
    EXPECT_EQ(qkv.output_size_per_partition(), (8 / tp + 2 * qkv.num_kv_heads()) * 8);
  }
}

TEST(LinearLayer, DivisibilityErrorsNameTheLayer) {
  EXPECT_QLM_ERROR(LinearLayer({.prefix = "model.layers.3.mlp.down_proj", .kind = LinearKind::Row, .input_size = 10,
                                .output_size = 4},
                               nullptr, cpu(), {.rank = 0, .size = 4, .comm = nullptr}),
                   "layer.tp_divisibility", "layer 'model.layers.3.mlp.down_proj': input size = 10 is not divisible");
  EXPECT_QLM_ERROR(LinearLayer(qkv_spec(64, 8, 2, 8), nullptr, cpu(), {.rank = 0, .size = 3, .comm = nullptr}),
                   "layer.tp_divisibility", "num_attention_heads = 8");
  EXPECT_QLM_ERROR(LinearLayer(qkv_spec(64, 12, 4, 8), nullptr, cpu(), {.rank = 0, .size = 6, .comm = nullptr}),
                   "layer.tp_divisibility", "not a multiple of num_key_value_heads = 4");
}

// Unfused q/k/v loaded into a QKV layer: every rank holds its q heads and its (possibly replicated)
// kv head group, at TP 1, 2, 4 (kv replicated) and 8.
TEST(LinearLayer, QkvGqaHeadSplitAndKvReplication) {
  const int64_t hidden = 16, heads = 8, kv = 2, hd = 4;
  Tensor q = grid(heads * hd, hidden, DType::F32, 0), k = grid(kv * hd, hidden, DType::F32, 100000),
         v = grid(kv * hd, hidden, DType::F32, 200000);
  for (int tp : {1, 2, 4, 8})
    for (int r = 0; r < tp; ++r) {
      LinearLayer l(qkv_spec(hidden, heads, kv, hd), nullptr, cpu(), {.rank = r, .size = tp, .comm = nullptr});
      l.load_weight("weight", q, ShardId::q(), "q_proj.weight");
      l.load_weight("weight", k, ShardId::k(), "k_proj.weight");
      EXPECT_FALSE(l.param("weight").fully_written());
      l.load_weight("weight", v, ShardId::v(), "v_proj.weight");
      ASSERT_TRUE(l.param("weight").fully_written());
      const Tensor& w = l.param("weight").data();
      const int64_t nq = l.num_heads() * hd, nk = l.num_kv_heads() * hd;
      const int64_t kv_group = r / l.num_kv_head_replicas();
      EXPECT_EQ(at(w, 0, 5), at(q, r * nq, 5)) << "tp " << tp << " rank " << r;
      EXPECT_EQ(at(w, nq - 1, 0), at(q, r * nq + nq - 1, 0));
      EXPECT_EQ(at(w, nq, 3), at(k, kv_group * nk, 3));
      EXPECT_EQ(at(w, nq + nk + nk - 1, 15), at(v, kv_group * nk + nk - 1, 15));
    }
}

// qkv_proj stored fused on disk (ShardId::whole) equals the unfused load, split by head counts.
TEST(LinearLayer, FusedOnDiskQkvSplitsByHeadCounts) {
  const int64_t hidden = 16, heads = 4, kv = 2, hd = 4;
  Tensor q = grid(heads * hd, hidden, DType::F32, 0), k = grid(kv * hd, hidden, DType::F32, 100000),
         v = grid(kv * hd, hidden, DType::F32, 200000);
  Tensor fused = Tensor::empty({(heads + 2 * kv) * hd, hidden}, DType::F32);
  std::vector<float> all;
  for (const Tensor* t : {&q, &k, &v})
    for (float f : t->to_float_vector()) all.push_back(f);
  fused = Tensor::from_vector(all, {(heads + 2 * kv) * hd, hidden});
  for (int r = 0; r < 2; ++r) {
    LinearLayer a(qkv_spec(hidden, heads, kv, hd), nullptr, cpu(), {.rank = r, .size = 2, .comm = nullptr});
    LinearLayer b(qkv_spec(hidden, heads, kv, hd), nullptr, cpu(), {.rank = r, .size = 2, .comm = nullptr});
    a.load_weight("weight", q, ShardId::q(), "q");
    a.load_weight("weight", k, ShardId::k(), "k");
    a.load_weight("weight", v, ShardId::v(), "v");
    b.load_weight("weight", fused, ShardId::whole(), "qkv_proj.weight");
    ASSERT_TRUE(b.param("weight").fully_written());
    EXPECT_EQ(a.param("weight").data().to_float_vector(), b.param("weight").data().to_float_vector());
  }
  LinearLayer c(qkv_spec(hidden, heads, kv, hd), nullptr, cpu(), {.rank = 0, .size = 1, .comm = nullptr});
  EXPECT_QLM_ERROR(c.load_weight("weight", grid(30, hidden), ShardId::whole(), "qkv_proj.weight"), "loader.shape",
                   "should have 32 = 16 + 8 + 8 along dim 0");
}

TEST(LinearLayer, MergedShardsAndFusedGateUp) {
  LinearSpec s{.prefix = "mlp.gate_up_proj", .kind = LinearKind::MergedColumn, .input_size = 4};
  s.output_sizes = {8, 8};
  Tensor gate = grid(8, 4, DType::BF16, 0), up = grid(8, 4, DType::BF16, 50000);
  s.params_dtype = DType::BF16;
  LinearLayer l(s, nullptr, cpu(), {.rank = 1, .size = 2, .comm = nullptr});
  l.load_weight("weight", gate, ShardId::at(0), "gate_proj.weight");
  l.load_weight("weight", up, ShardId::at(1), "up_proj.weight");
  const Tensor& w = l.param("weight").data();
  EXPECT_EQ(at(w, 0, 1), at(gate, 4, 1));
  EXPECT_EQ(at(w, 4, 2), at(up, 4, 2));
  EXPECT_QLM_ERROR(l.load_weight("weight", gate, ShardId::at(2), "x"), "loader.shard_id", "expected 0..1");
  EXPECT_QLM_ERROR(l.load_weight("weight", gate, ShardId::q(), "x"), "loader.shard_id", "'q'");
  EXPECT_QLM_ERROR(l.load_weight("weight", grid(6, 4, DType::BF16), ShardId::at(0), "gate_proj.weight"),
                   "loader.shape", "expects checkpoint tensor 'gate_proj.weight' to have 8 along dim 0");
  EXPECT_QLM_ERROR(l.load_weight("qweight", gate, ShardId::at(0), "gate_proj.qweight"), "loader.unknown_param",
                   "has no parameter 'qweight'");
}

// GPTQ layout (FORMATS.md §4.4) in a row-parallel layer: qweight/scales/qzeros/g_idx split along K;
// with act-order the scale table (ChannelScale) is whole on every rank.
TEST(LinearLayer, GptqRowParallelSharding) {
  const int64_t K = 64, N = 16, G = 8, tp = 2, K_p = K / tp;
  for (bool act_order : {false, true}) {
    DeclareOnlyConfig config([&](LinearLayer& l, int64_t kp, const std::vector<int64_t>&, int64_t k, int64_t n, DType) {
      declare(l, "qweight", ParamKind::PackedWeight, {kp / 8, n}, DType::I32, 0, 1, 0, {8, 1});
      const int64_t groups = act_order ? k / G : kp / G;
      declare(l, "scales", act_order ? ParamKind::ChannelScale : ParamKind::GroupScale, {groups, n}, DType::F16,
              act_order ? -1 : 0, 1);
      declare(l, "qzeros", act_order ? ParamKind::PackedColumn : ParamKind::PackedWeight, {groups, n / 8},
              DType::I32, act_order ? -1 : 0, 1, 1, {8, 1});
      declare(l, "g_idx", ParamKind::RowVector, {kp}, DType::I32, 0, -1);
    });
    Tensor qweight = grid(K / 8, N, DType::I32), scales = grid(K / G, N, DType::F16), qzeros = grid(K / G, N / 8, DType::I32);
    Tensor g_idx = grid(1, K, DType::I32).view({K});
    for (int r = 0; r < tp; ++r) {
      LinearLayer l({.prefix = "down_proj", .kind = LinearKind::Row, .input_size = K, .output_size = N}, &config,
                    cpu(), {.rank = r, .size = static_cast<int>(tp), .comm = nullptr});
      l.load_weight("qweight", qweight, ShardId::whole(), "down_proj.qweight");
      l.load_weight("scales", scales, ShardId::whole(), "down_proj.scales");
      l.load_weight("qzeros", qzeros, ShardId::whole(), "down_proj.qzeros");
      l.load_weight("g_idx", g_idx, ShardId::whole(), "down_proj.g_idx");
      EXPECT_TRUE(l.incomplete_params().empty());
      EXPECT_EQ(at(l.param("qweight").data(), 0, 2), at(qweight, r * K_p / 8, 2));
      const int64_t first_group = act_order ? 0 : r * K_p / G;
      EXPECT_EQ(at(l.param("scales").data(), 0, 7), at(scales, first_group, 7));
      EXPECT_EQ(at(l.param("qzeros").data(), 1, 1), at(qzeros, first_group + 1, 1));
      EXPECT_EQ(l.param("g_idx").data().span<int32_t>()[0], r * K_p);
    }
  }
}

// GPTQ in a QKV layer (the worked example of FORMATS.md §4.4, scaled down): qweight split on N,
// qzeros packed on N with the pack adjustment, g_idx whole and identical for q, k and v.
TEST(LinearLayer, GptqQkvShardingWithPackedZeros) {
  const int64_t hidden = 64, heads = 8, kv = 2, hd = 8, G = 16;
  DeclareOnlyConfig config([&](LinearLayer& l, int64_t kp, const std::vector<int64_t>& parts, int64_t, int64_t, DType) {
    int64_t np = 0;
    for (int64_t p : parts) np += p;
    declare(l, "qweight", ParamKind::PackedWeight, {kp / 8, np}, DType::I32, 0, 1, 0, {8, 1});
    declare(l, "qzeros", ParamKind::PackedWeight, {kp / G, np / 8}, DType::I32, 0, 1, 1, {8, 1});
    declare(l, "g_idx", ParamKind::RowVector, {kp}, DType::I32, 0, -1);
  });
  Tensor g_idx = grid(1, hidden, DType::I32).view({hidden});
  for (int r = 0; r < 2; ++r) {
    LinearLayer l(qkv_spec(hidden, heads, kv, hd), &config, cpu(), {.rank = r, .size = 2, .comm = nullptr});
    // Per rank: q 32, k 8, v 8 -> N_p 48; qzeros [4, 6]; k slot at word 4, 1 word.
    EXPECT_EQ(l.param("qzeros").shape(), (Shape{4, 6}));
    for (auto [id, rows, name] : {std::tuple{ShardId::q(), heads * hd, "q"}, std::tuple{ShardId::k(), kv * hd, "k"},
                                  std::tuple{ShardId::v(), kv * hd, "v"}}) {
      const int64_t base = id.kind == ShardId::Kind::Q ? 0 : id.kind == ShardId::Kind::K ? 100000 : 200000;
      l.load_weight("qweight", grid(hidden / 8, rows, DType::I32, base), id, std::string(name) + "_proj.qweight");
      l.load_weight("qzeros", grid(hidden / G, rows / 8, DType::I32, base), id, std::string(name) + "_proj.qzeros");
      l.load_weight("g_idx", g_idx, id, std::string(name) + "_proj.g_idx");
    }
    EXPECT_TRUE(l.incomplete_params().empty());
    EXPECT_EQ(at(l.param("qweight").data(), 1, 32), 100000 + 1000 + r * 8);
    EXPECT_EQ(at(l.param("qzeros").data(), 2, 4), 100000 + 2000 + r);
    EXPECT_EQ(at(l.param("qzeros").data(), 2, 5), 200000 + 2000 + r);
    EXPECT_QLM_ERROR(l.load_weight("g_idx", grid(1, hidden, DType::I32, 7).view({hidden}), ShardId::q(), "q_proj.g_idx"),
                     "loader.double_write", "layer 'l.qkv_proj'");
  }
}

// AWQ qweight [K, N/8] / scales [K/G, N] in a merged gate_up layer at TP=2.
TEST(LinearLayer, AwqMergedColumnSharding) {
  const int64_t K = 16, I = 32, G = 8;
  DeclareOnlyConfig config([&](LinearLayer& l, int64_t kp, const std::vector<int64_t>& parts, int64_t, int64_t, DType) {
    const int64_t np = parts[0] + parts[1];
    declare(l, "qweight", ParamKind::PackedWeight, {kp, np / 8}, DType::I32, 0, 1, 1, {8, 1});
    declare(l, "scales", ParamKind::GroupScale, {kp / G, np}, DType::F16, 0, 1);
  });
  LinearSpec s{.prefix = "mlp.gate_up_proj", .kind = LinearKind::MergedColumn, .input_size = K};
  s.output_sizes = {I, I};
  LinearLayer l(s, &config, cpu(), {.rank = 1, .size = 2, .comm = nullptr});
  l.load_weight("qweight", grid(K, I / 8, DType::I32, 0), ShardId::at(0), "gate_proj.qweight");
  l.load_weight("qweight", grid(K, I / 8, DType::I32, 50000), ShardId::at(1), "up_proj.qweight");
  l.load_weight("scales", grid(K / G, I, DType::F16, 0), ShardId::at(0), "gate_proj.scales");
  EXPECT_EQ(at(l.param("qweight").data(), 3, 0), 3002);        // gate words [2, 4) of rank 1
  EXPECT_EQ(at(l.param("qweight").data(), 3, 3), 50000 + 3003);  // up words land at [2, 4)
  auto missing = l.incomplete_params();
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("'scales' F16[2, 32]: unwritten [0, 2) x [16, 32)"), std::string::npos) << missing[0];
  EXPECT_QLM_ERROR(l.finalize(), "loader.incomplete", "'scales' F16[2, 32]: unwritten");
}

TEST(LinearLayer, PackedSplitThatCutsAWordIsRejectedAtConstruction) {
  DeclareOnlyConfig three_bit([](LinearLayer& l, int64_t kp, const std::vector<int64_t>&, int64_t, int64_t n, DType) {
    PackFactor f{32, 3};
    declare(l, "qweight", ParamKind::PackedWeight, {f.logical_to_packed(kp), n}, DType::I32, 0, 1, 0, f);
  });
  EXPECT_QLM_ERROR(LinearLayer({.prefix = "down_proj", .kind = LinearKind::Row, .input_size = 96, .output_size = 8},
                               &three_bit, cpu(), {.rank = 0, .size = 2, .comm = nullptr}),
                   "layer.packed_split", "K per rank 48 is not a multiple of 32 for 3-bit packing");
  EXPECT_QLM_ERROR(LinearLayer({.prefix = "down_proj", .kind = LinearKind::Row, .input_size = 192, .output_size = 8},
                               &three_bit, cpu(), {.rank = 0, .size = 4, .comm = nullptr}),
                   "layer.packed_split", "use tp 1 or 2");
  LinearLayer ok({.prefix = "down_proj", .kind = LinearKind::Row, .input_size = 192, .output_size = 8}, &three_bit,
                 cpu(), {.rank = 1, .size = 2, .comm = nullptr});
  EXPECT_EQ(ok.param("qweight").shape(), (Shape{9, 8}));
}

TEST(LinearLayer, BlockStraddlingRanksIsRejectedAtConstruction) {
  DeclareOnlyConfig block([](LinearLayer& l, int64_t kp, const std::vector<int64_t>& parts, int64_t, int64_t, DType) {
    int64_t np = 0;
    for (int64_t p : parts) np += p;
    declare(l, "weight", ParamKind::Weight, {np, kp}, DType::F8_E4M3, 1, 0);
    Parameter& s = declare(l, "weight_scale_inv", ParamKind::BlockScale, {(np + 127) / 128, (kp + 127) / 128},
                           DType::F32, 1, 0);
    s.block_n = s.block_k = 128;
  });
  EXPECT_QLM_ERROR(LinearLayer({.prefix = "o_proj", .kind = LinearKind::Row, .input_size = 384, .output_size = 128},
                               &block, cpu(), {.rank = 0, .size = 2, .comm = nullptr}),
                   "layer.block_split", "K per rank 192 is not a multiple of the block size 128");
}

// Per-tensor scales of a fused layer: one slot per part, or one fused scalar for all slots.
TEST(LinearLayer, PerTensorScaleSlots) {
  DeclareOnlyConfig fp8([](LinearLayer& l, int64_t, const std::vector<int64_t>& parts, int64_t, int64_t, DType) {
    declare(l, "weight_scale", ParamKind::PerTensorScale, {static_cast<int64_t>(parts.size())}, DType::F32, -1, -1);
    declare(l, "input_scale", ParamKind::PerTensorScale, {static_cast<int64_t>(parts.size())}, DType::F32, -1, -1);
  });
  LinearLayer l(qkv_spec(16, 4, 2, 4), &fp8, cpu(), {.rank = 0, .size = 2, .comm = nullptr});
  l.load_weight("weight_scale", Tensor::from_vector<float>({0.5f}, {}), ShardId::q(), "q_proj.weight_scale");
  l.load_weight("weight_scale", Tensor::from_vector<float>({0.25f}, {1}), ShardId::k(), "k_proj.weight_scale");
  l.load_weight("weight_scale", Tensor::from_vector<float>({0.125f}, {}), ShardId::v(), "v_proj.weight_scale");
  EXPECT_EQ(l.param("weight_scale").data().to_float_vector(), (std::vector<float>{0.5f, 0.25f, 0.125f}));
  l.load_weight("input_scale", Tensor::from_vector<float>({2.0f}, {}), ShardId::whole(), "qkv_proj.input_scale");
  EXPECT_EQ(l.param("input_scale").data().to_float_vector(), (std::vector<float>{2.0f, 2.0f, 2.0f}));
  EXPECT_TRUE(l.incomplete_params().empty());
}

TEST(LinearLayer, FinalizeReportsUnwrittenParamsAndForwardNeedsIt) {
  LinearLayer l(qkv_spec(16, 4, 2, 4), nullptr, cpu(), {.rank = 0, .size = 1, .comm = nullptr});
  l.load_weight("weight", grid(16, 16), ShardId::q(), "q_proj.weight");
  l.load_weight("weight", grid(8, 16), ShardId::k(), "k_proj.weight");
  EXPECT_QLM_ERROR(l.forward(Tensor::zeros({1, 16}, DType::F32)), "layer.not_finalized", "before finalize");
  EXPECT_QLM_ERROR(l.finalize(), "loader.incomplete", "'weight' F32[32, 16]: unwritten [24, 32) x [0, 16)");
  l.load_weight("weight", grid(8, 16), ShardId::v(), "v_proj.weight");
  l.finalize();
  EXPECT_QLM_ERROR(l.forward(Tensor::zeros({1, 15}, DType::F32)), "layer.input_shape", "F32[M, 16]");
}

}  // namespace
}  // namespace qlm
