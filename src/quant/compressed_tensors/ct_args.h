// compressed-tensors QuantizationArgs (compressed_tensors/quantization/quant_args.py; FORMATS.md
// §2.6, RELIABILITY.md C5): parsed strictly (unknown fields are forbidden, types are not coerced)
// and validated with the library's own rules, so a malformed scheme fails at config time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "io/json.h"

namespace qlm::ct {

enum class QuantType : uint8_t { Int, Float };
enum class Strategy : uint8_t { Tensor, Channel, Group, Block, Token, TensorGroup, AttnHead };
enum class ActOrder : uint8_t { None, Group, Weight };
enum class Dynamic : uint8_t { Static, Dynamic, Local };

const char* strategy_name(Strategy s);
const char* act_order_name(ActOrder a);

struct QuantArgs {
  int num_bits = 8;
  QuantType type = QuantType::Int;
  bool symmetric = true;
  std::optional<int64_t> group_size;
  Strategy strategy = Strategy::Tensor;
  std::optional<std::pair<int64_t, int64_t>> block_structure;
  Dynamic dynamic = Dynamic::Static;
  ActOrder actorder = ActOrder::None;
  std::optional<std::string> scale_dtype;  // as written ("torch.float8_e4m3fn", "torch.uint8"); null: the default
  std::string describe() const;  // "int4 sym group(128) actorder=group"
};

// Parses one QuantizationArgs object (`weights`, `input_activations`, ...).
QuantArgs parse_quant_args(const io::JsonView& args);

}  // namespace qlm::ct
