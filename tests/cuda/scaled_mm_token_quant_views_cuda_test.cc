// quantize_acts_per_token_cuda on the activations the vectorised quantizer cannot take: a view that does not start on
// a 16-byte boundary and rows whose length is not a multiple of 8 go to the general quantizer (quantize_acts_cuda).
// Every case — aligned, shifted by one element, odd K — must give the CPU quantizer's codes and scales bit for bit,
// FP8 and INT8, BF16 / F16 / F32 activations. Needs a GPU; skips without one.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "kernels/scaled_mm.h"
#include "support/scaled_mm_test_data.h"

#ifdef QLM_WITH_CUDA
#include "kernels/cuda/scaled_mm_cuda_common.h"
#endif

namespace qlm {
namespace {

#ifdef QLM_WITH_CUDA

// x [M, K] on GPU 0 as `act`, starting `shift` elements into its buffer (a view of a larger allocation), quantized by
// quantize_acts_per_token_cuda.
testing::TokenCodes gpu_codes(bool int8, const std::vector<float>& x, int64_t M, int64_t K, DType act, int64_t shift) {
  std::vector<float> padded(static_cast<size_t>(shift), 7.0f);  // never read: a larger value would change the scale
  padded.insert(padded.end(), x.begin(), x.end());
  const Tensor buffer = Tensor::from_vector(padded, {shift + M * K}).to(act).to_device(Device::cuda(0));
  const Tensor view = buffer.narrow(0, shift, M * K).view({M, K});
  const CudaActCodes q =
      quantize_acts_per_token_cuda(testing::token_quant_config(int8, K, act, Device::cuda(0)), view, false);
  const Tensor codes = q.codes.to_device(Device::cpu());
  std::vector<float> scales = q.scales.to_device(Device::cpu()).to_float_vector();
  scales.resize(static_cast<size_t>(M));  // one per row (the general quantizer's layout has M * groups, groups 1)
  const auto* bytes = reinterpret_cast<const uint8_t*>(codes.raw_data());
  return {std::vector<uint8_t>(bytes, bytes + M * K), scales};
}

TEST(CudaScaledMMTokenQuantViews, MisalignedAndOddRowsMatchCpuBitExactly) {
  if (cuda_devices().empty()) GTEST_SKIP() << "no CUDA device";
  int cases = 0;
  for (bool int8 : {false, true})
    for (DType act : {DType::BF16, DType::F16, DType::F32})
      for (int64_t M : {1, 3, 37})
        for (int64_t K : {13, 264, 4101, 4096})
          for (int64_t shift : {0, 1, 3}) {
            const std::vector<float> x = testing::scaled_mm_test_acts(M, K, act, 5 + M * 7 + K + shift);
            const std::string what =
                fmt::format("{} {} M={} K={} shift={}", int8 ? "int8" : "fp8", dtype_name(act), M, K, shift);
            const testing::TokenCodes got = gpu_codes(int8, x, M, K, act, shift);
            const testing::TokenCodes want = testing::cpu_token_codes(x, M, K, act, int8);
            ASSERT_EQ(got.scales, want.scales) << what;
            ASSERT_EQ(got.codes.size(), want.codes.size()) << what;
            for (size_t i = 0; i < want.codes.size(); ++i) ASSERT_EQ(got.codes[i], want.codes[i]) << what << " at " << i;
            ++cases;
          }
  EXPECT_EQ(cases, 2 * 3 * 3 * 4 * 3);
}

#endif

}  // namespace
}  // namespace qlm
