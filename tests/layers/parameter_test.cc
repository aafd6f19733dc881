// Parameter loading (FORMATS.md §4.1): lazy sentinel storage, whole/column/row/scalar loads with
// packed and blocked dimensions, dtype and shape rules, and exactly-once write tracking.
#include "layers/parameter.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/expect_error.h"

namespace qlm {
namespace {

// I32 [rows, cols] with value 1000*r + c, so every slice is recognisable.
Tensor grid(int64_t rows, int64_t cols) {
  std::vector<int32_t> v;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) v.push_back(static_cast<int32_t>(1000 * r + c));
  return Tensor::from_vector(v, {rows, cols});
}

int32_t at(const Tensor& t, int64_t r, int64_t c) {
  int64_t idx[2] = {r, c};
  return static_cast<int32_t>(t.item_as_double(idx));
}

Parameter make(std::string name, ParamKind kind, Shape shape, DType dtype, int in, int out, int packed = -1,
               PackFactor f = {}) {
  Parameter p(std::move(name), kind, std::move(shape), dtype);
  p.input_dim = in;
  p.output_dim = out;
  p.packed_dim = packed;
  p.packed_factor = f;
  return p;
}

TEST(Parameter, StorageIsLazyAndStartsAsSentinel) {
  Parameter f("scales", ParamKind::GroupScale, {2, 3}, DType::F32);
  EXPECT_FALSE(f.written_at_all());
  EXPECT_FALSE(f.fully_written());
  for (float v : f.data().to_float_vector()) EXPECT_TRUE(std::isnan(v));
  Parameter h("s16", ParamKind::GroupScale, {4}, DType::BF16);
  for (float v : h.data().to_float_vector()) EXPECT_TRUE(std::isnan(v));
  Parameter i("qweight", ParamKind::PackedWeight, {2, 2}, DType::I32);
  for (int32_t v : i.data().span<int32_t>()) EXPECT_EQ(v, 0);
  EXPECT_NE(f.unwritten_description().find("nothing written"), std::string::npos);
}

TEST(Parameter, WholeLoadChecksShapeAndNamesBoth) {
  Parameter p("weight_shape", ParamKind::Replicated, {2}, DType::I64);
  EXPECT_QLM_ERROR(p.load_whole(Tensor::zeros({3}, DType::I64), "m.weight_shape"), "loader.shape",
                   "expects shape [2] but checkpoint tensor 'm.weight_shape' is I64[3]");
  p.load_whole(Tensor::from_vector<int64_t>({5, 7}, {2}), "m.weight_shape");
  EXPECT_TRUE(p.fully_written());
  EXPECT_EQ(p.data().span<int64_t>()[1], 7);
}

TEST(Parameter, DoubleWriteIsAnErrorUnlessIdentical) {
  Parameter g("g_idx", ParamKind::RowVector, {4}, DType::I32);
  Tensor a = Tensor::from_vector<int32_t>({0, 1, 1, 0}, {4});
  g.load_whole(a, "q_proj.g_idx");
  g.load_whole(a.clone(), "k_proj.g_idx");  // fused q/k/v carry the same g_idx
  EXPECT_QLM_ERROR(g.load_whole(Tensor::from_vector<int32_t>({0, 1, 1, 1}, {4}), "v_proj.g_idx"),
                   "loader.double_write", "'g_idx' [0, 4) was already written with different values");
}

TEST(Parameter, PartialOverlapComparesOnlyTheOverlap) {
  Parameter p = make("w", ParamKind::Weight, {4, 2}, DType::I32, 1, 0);
  Tensor full = grid(8, 2);
  p.load_column(full, 0, 2, 0, "a");  // rows [0, 2) <- full rows [0, 2)
  p.load_column(full, 2, 2, 1, "b");  // rows [2, 4) <- full rows [2, 4)
  EXPECT_TRUE(p.fully_written());
  EXPECT_QLM_ERROR(p.load_column(full, 1, 2, 2, "c"), "loader.double_write", "[1, 2) x [0, 2)");
}

TEST(Parameter, DtypeIsStrictExceptScalesWidenToF32) {
  Parameter w("weight", ParamKind::Weight, {2, 2}, DType::F16);
  EXPECT_QLM_ERROR(w.load_whole(Tensor::zeros({2, 2}, DType::F32), "x.weight"), "loader.dtype",
                   "has dtype F16 but checkpoint tensor 'x.weight' is F32[2, 2]");
  Parameter s("weight_scale", ParamKind::ChannelScale, {3}, DType::F32);
  Tensor bf = Tensor::from_vector<float>({0.5f, 1.5f, -2.25f}, {3}).to(DType::BF16);
  s.load_whole(bf, "x.weight_scale");
  EXPECT_EQ(s.data().to_float_vector(), (std::vector<float>{0.5f, 1.5f, -2.25f}));
  Parameter q("qweight", ParamKind::PackedWeight, {2}, DType::I32);
  EXPECT_QLM_ERROR(q.load_whole(Tensor::zeros({2}, DType::U32), "x.qweight"), "loader.dtype", "U32");
}

TEST(Parameter, ScalarsAcceptZeroDimAndOneElement) {
  Parameter one("input_scale", ParamKind::Replicated, {1}, DType::F32);
  one.load_whole(Tensor::from_vector<float>({2.0f}, {}), "a");
  EXPECT_TRUE(one.fully_written());
  Parameter slots("weight_scale", ParamKind::PerTensorScale, {3}, DType::F32);
  slots.load_scalar_slot(Tensor::from_vector<float>({1.0f}, {}), 0, "q");
  slots.load_scalar_slot(Tensor::from_vector<float>({2.0f}, {1}), 2, "v");
  EXPECT_FALSE(slots.fully_written());
  EXPECT_NE(slots.unwritten_description().find("[1, 2)"), std::string::npos);
  slots.load_scalar_slot(Tensor::from_vector<float>({3.0f}, {1, 1}), 1, "k");
  EXPECT_TRUE(slots.fully_written());
  EXPECT_EQ(slots.data().to_float_vector(), (std::vector<float>{1.0f, 3.0f, 2.0f}));
  EXPECT_QLM_ERROR(slots.load_scalar_slot(Tensor::zeros({2}, DType::F32), 0, "bad"), "loader.shape",
                   "expects one scalar");
  EXPECT_QLM_ERROR(slots.load_scalar_slot(Tensor::zeros({}, DType::F32), 3, "bad"), "loader.shard_id", "slot 3");
}

// GPTQ qweight [K/8, N] in a row-parallel layer: rank r takes packed rows [r*K_p/8, (r+1)*K_p/8).
TEST(Parameter, GptqQweightRowSplitTakesPackedRows) {
  const int64_t K = 64, N = 16, tp = 2;
  Tensor full = grid(K / 8, N);
  for (int r = 0; r < tp; ++r) {
    Parameter p = make("qweight", ParamKind::PackedWeight, {K / tp / 8, N}, DType::I32, 0, 1, 0, {8, 1});
    p.load_row(full, r, tp, "down_proj.qweight");
    EXPECT_TRUE(p.fully_written());
    EXPECT_EQ(at(p.data(), 0, 3), at(full, r * 4, 3));
    EXPECT_EQ(at(p.data(), 3, 15), at(full, r * 4 + 3, 15));
  }
  Parameter p = make("qweight", ParamKind::PackedWeight, {3, N}, DType::I32, 0, 1, 0, {8, 1});
  EXPECT_QLM_ERROR(p.load_row(full, 0, 2, "down_proj.qweight"), "loader.shape", "3 per rank along dim 0 x 2 ranks");
}

// AWQ qweight [K, N/8] in a column-parallel layer: output offsets are divided by the pack factor.
TEST(Parameter, AwqQweightColumnSplitAdjustsForPacking) {
  const int64_t K = 8, N = 64, tp = 2, N_p = N / tp;
  Tensor full = grid(K, N / 8);
  for (int r = 0; r < tp; ++r) {
    Parameter p = make("qweight", ParamKind::PackedWeight, {K, N_p / 8}, DType::I32, 0, 1, 1, {8, 1});
    p.load_column(full, 0, N_p, r, "up_proj.qweight");
    EXPECT_TRUE(p.fully_written());
    EXPECT_EQ(at(p.data(), 5, 0), at(full, 5, r * 4));
    EXPECT_EQ(at(p.data(), 7, 3), at(full, 7, r * 4 + 3));
  }
  // Merged part at logical offset 32 lands at word 4.
  Parameter merged = make("qweight", ParamKind::PackedWeight, {K, 8}, DType::I32, 0, 1, 1, {8, 1});
  merged.load_column(grid(K, 4), 32, 32, 0, "up_proj.qweight");
  EXPECT_EQ(at(merged.data(), 1, 4), 1000);
  EXPECT_NE(merged.unwritten_description().find("[0, 8) x [0, 4)"), std::string::npos);
  EXPECT_QLM_ERROR(merged.load_column(grid(K, 4), 0, 12, 0, "gate_proj.qweight"), "loader.packed_split",
                   "not a multiple of 8 for 4-bit packing");
}

// GPTQ qzeros [G, N/8] (packed along N) in a column layer, and 3-bit packing as a fraction.
TEST(Parameter, QzerosAndThreeBitPacking) {
  Tensor full = grid(2, 8);  // G = 2, N = 64
  Parameter z = make("qzeros", ParamKind::PackedWeight, {2, 2}, DType::I32, 0, 1, 1, {8, 1});
  z.load_column(full, 0, 16, 3, "q_proj.qzeros");
  EXPECT_EQ(at(z.data(), 1, 1), at(full, 1, 7));

  PackFactor three{32, 3};
  EXPECT_TRUE(three.divides(64));
  EXPECT_FALSE(three.divides(1000));
  EXPECT_EQ(three.logical_to_packed(1000), 94);
  Parameter q3 = make("qzeros", ParamKind::PackedWeight, {1, 6}, DType::I32, 0, 1, 1, three);
  q3.load_column(grid(1, 12), 0, 64, 1, "q_proj.qzeros");  // 64 logical = 6 words
  EXPECT_EQ(at(q3.data(), 0, 0), at(grid(1, 12), 0, 6));
  EXPECT_QLM_ERROR(q3.load_column(grid(1, 12), 0, 48, 0, "q_proj.qzeros"), "loader.packed_split",
                   "not a multiple of 32 for 3-bit packing");
}

TEST(Parameter, BlockScalesUseCeilDividedBlocks) {
  // N = 300 with 128-wide blocks: 3 block rows, the last one partial.
  Parameter s = make("weight_scale_inv", ParamKind::BlockScale, {3, 2}, DType::F32, 1, 0);
  s.block_n = 128;
  s.block_k = 128;
  Tensor full = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  s.load_column(full, 0, 300, 0, "x.weight_scale_inv");
  EXPECT_TRUE(s.fully_written());
  // Merged parts of 256 and 44 outputs: the second part starts at block 2.
  Parameter m = make("weight_scale_inv", ParamKind::BlockScale, {3, 2}, DType::F32, 1, 0);
  m.block_n = 128;
  m.load_column(full.narrow(0, 0, 2), 0, 256, 0, "gate.weight_scale_inv");
  m.load_column(full.narrow(0, 2, 1), 256, 44, 0, "up.weight_scale_inv");
  EXPECT_TRUE(m.fully_written());
  // Rank 1 of a 2-way split of 300 starts inside a block.
  Parameter r1 = make("weight_scale_inv", ParamKind::BlockScale, {2, 2}, DType::F32, 1, 0);
  r1.block_n = 128;
  EXPECT_QLM_ERROR(r1.load_column(full, 0, 150, 1, "x.weight_scale_inv"), "loader.block_split",
                   "straddles tensor-parallel ranks");
}

TEST(Parameter, ColumnLoadShapeMismatchNamesParamAndTensor) {
  Parameter p = make("scales", ParamKind::GroupScale, {4, 8}, DType::F32, 0, 1);
  EXPECT_QLM_ERROR(p.load_column(Tensor::zeros({3, 16}, DType::F32), 0, 8, 1, "o.scales"), "loader.shape",
                   "checkpoint tensor 'o.scales' F32[3, 16]");
}

}  // namespace
}  // namespace qlm
