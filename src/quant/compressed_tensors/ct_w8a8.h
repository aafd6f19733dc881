// compressed-tensors schemes beyond pack-quantized WNA16 (FORMATS.md §2.6 dispatch order, §3.3):
// float-quantized FP8 W8A8 / W8A16 (tensor, channel or block weights; static per-tensor or dynamic
// activations), int-quantized INT8 W8A8 (tensor or channel weights; static per-tensor or dynamic
// per-token activations, symmetric or with a zero point), and naive-quantized (the same, codes
// stored in the args' dtype). The schemes vLLM knows but qlm does not run yet are named.
#pragma once

#include <optional>
#include <string>

#include "quant/compressed_tensors/ct_args.h"
#include "quant/fp4_method.h"
#include "quant/w8a8_method.h"

namespace qlm::ct {

// Formats whose input activation quantization is honoured.
bool is_activation_format(const std::string& format);
// Steps 1-3 and the W4A8/NVFP4 cases of step 5: the name of a known scheme qlm does not support
// ("NVFP4 W4A4", "MXFP4 W4A4", "MXFP8", "W4A8-FP8", "W4A8 int", "Sparse24"), or empty.
std::string known_unsupported(const std::string& format, const std::optional<QuantArgs>& weights,
                              const std::optional<QuantArgs>& inputs);
// Steps 1-2 for float4 weights with float activations (NVFP4A16, MXFP4A16): the scheme; nullopt with `why` empty
// when the args are not float4 weight-only at all, nullopt with `why` set to what differs when they are but fit
// neither format.
std::optional<Fp4Scheme> fp4_weight_only_scheme(const std::string& format, const std::optional<QuantArgs>& weights,
                                                const std::optional<QuantArgs>& inputs,
                                                const std::optional<QuantArgs>& outputs, std::string* why);
// Step 5: the FP8 W8A8 / FP8 W8A16 / INT8 W8A8 scheme of these args, nullopt when none matches.
// `why` receives the mismatch found (for the "no compatible scheme" error).
std::optional<W8A8Scheme> w8a8_scheme(const std::string& format, const QuantArgs& weights,
                                      const std::optional<QuantArgs>& inputs, std::string* why);

}  // namespace qlm::ct
