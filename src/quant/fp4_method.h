// Linear method of float4 (e2m1) weights with float activations (W4A16-FP4): compressed-tensors
// nvfp4-pack-quantized NVFP4A16 (groups of 16 along K with e4m3 block scales and a float32 global scale per
// tensor, dequantized as code * scale / global_scale) and mxfp4-pack-quantized MXFP4A16 (groups of 32 with
// e8m0 block scales, code * 2^(e - 127)).
//
// Checkpoint tensors (compressed-tensors 0.19): weight_packed uint8 [N, K/2] (element 2j in the low nibble of
// byte j, 2j+1 in the high one), weight_scale [N, K/group] (float8_e4m3fn for NVFP4, uint8 exponents for MXFP4),
// weight_global_scale float32 [1] (NVFP4 only; one per part of a fused layer).
//
// Every e2m1 value is exact in e4m3, so the weights become the scaled-mm standard form of FP8 W8A16 with
// per-(row, group) scales (kernels/scaled_mm.h, block 1 x group): e4m3 codes [N, K] and F32 multipliers
// [N, K/group] = block scale / global scale of the row's part (one float32 rounding, the division
// compressed-tensors' own dequantization does). Any scaled-mm kernel that runs FP8 block-scaled W8A16 runs it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/scaled_mm.h"
#include "layers/linear.h"
#include "quant/quantization_config.h"
#include "quant/scaled_mm_layer_kernel.h"

namespace qlm {

enum class Fp4Kind : uint8_t { Nvfp4, Mxfp4 };

struct Fp4Scheme {
  Fp4Kind kind = Fp4Kind::Nvfp4;
  int64_t group_size = 16;
  std::string describe() const;  // "nvfp4 e2m1 g16 (e4m3 scales, global scale)"
  friend bool operator==(const Fp4Scheme&, const Fp4Scheme&) = default;
};

// [N, K/2] packed e2m1 pairs -> [N, K] e4m3 codes of the same values (bit-exact, every nibble).
Tensor fp4_packed_to_e4m3(const Tensor& packed);

class Fp4LinearMethod final : public LinearMethod {
 public:
  Fp4LinearMethod(std::string format, Fp4Scheme scheme);

  std::string name() const override { return format_; }
  void create_weights(LinearLayer& layer, int64_t K_p, const std::vector<int64_t>& output_partition_sizes, int64_t K,
                      int64_t N, DType params_dtype) override;
  void process_weights_after_loading(LinearLayer& layer) override;
  Tensor apply(LinearLayer& layer, const Tensor& x, const Tensor* bias) override;
  std::string describe() const override;

  const Fp4Scheme& scheme() const { return scheme_; }
  const ScaledMMConfig& kernel_config() const { return kernel_.config(); }

 private:
  Tensor block_multipliers(LinearLayer& layer) const;
  std::string format_;
  Fp4Scheme scheme_;
  int64_t K_p_ = 0, N_p_ = 0;
  std::vector<int64_t> parts_;
  ScaledMMLayerKernel kernel_;
};

}  // namespace qlm
