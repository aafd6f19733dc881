#include "quant/compressed_tensors/ct_args.h"

#include <fmt/format.h>

namespace qlm::ct {

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::Tensor: return "tensor";
    case Strategy::Channel: return "channel";
    case Strategy::Group: return "group";
    case Strategy::Block: return "block";
    case Strategy::Token: return "token";
    case Strategy::TensorGroup: return "tensor_group";
    case Strategy::AttnHead: return "attn_head";
  }
  return "?";
}

const char* act_order_name(ActOrder a) {
  switch (a) {
    case ActOrder::None: return "null";
    case ActOrder::Group: return "group";
    case ActOrder::Weight: return "weight";
  }
  return "?";
}

std::string QuantArgs::describe() const {
  std::string s = fmt::format("{}{} {} {}", type == QuantType::Int ? "int" : "float", num_bits,
                              symmetric ? "sym" : "asym", strategy_name(strategy));
  if (group_size) s += fmt::format("({})", *group_size);
  if (dynamic != Dynamic::Static) s += dynamic == Dynamic::Local ? " dynamic=local" : " dynamic";
  if (actorder != ActOrder::None) s += fmt::format(" actorder={}", act_order_name(actorder));
  return s;
}

namespace {

Strategy parse_strategy(const io::JsonView& a, const std::string& v) {
  static const std::pair<const char*, Strategy> kNames[] = {
      {"tensor", Strategy::Tensor}, {"channel", Strategy::Channel},          {"group", Strategy::Group},
      {"block", Strategy::Block},   {"token", Strategy::Token},              {"tensor_group", Strategy::TensorGroup},
      {"attn_head", Strategy::AttnHead}};
  for (const auto& [name, s] : kNames)
    if (v == name) return s;
  a.fail_value("strategy", "one of tensor, channel, group, block, token, tensor_group, attn_head");
}

ActOrder parse_actorder(const io::JsonView& a) {
  if (!a.has("actorder") || a.is_null("actorder")) return ActOrder::None;
  const nlohmann::json& v = a.at("actorder");
  if (v.is_boolean()) return v.get<bool>() ? ActOrder::Group : ActOrder::None;
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "group" || s == "dynamic") return ActOrder::Group;
    if (s == "weight" || s == "static") return ActOrder::Weight;
  }
  a.fail_value("actorder", "null, true, false, \"group\" (alias \"dynamic\") or \"weight\" (alias \"static\")");
}

Dynamic parse_dynamic(const io::JsonView& a) {
  if (!a.has("dynamic") || a.is_null("dynamic")) return Dynamic::Static;
  const nlohmann::json& v = a.at("dynamic");
  if (v.is_boolean()) return v.get<bool>() ? Dynamic::Dynamic : Dynamic::Static;
  if (v.is_string() && v.get<std::string>() == "local") return Dynamic::Local;
  a.fail_value("dynamic", "true, false or \"local\"");
}

std::optional<std::pair<int64_t, int64_t>> parse_block(const io::JsonView& a) {
  if (!a.has("block_structure") || a.is_null("block_structure")) return std::nullopt;
  const nlohmann::json& v = a.at("block_structure");
  if (v.is_string()) {  // legacy "NxM"
    const std::string s = v.get<std::string>();
    const size_t x = s.find('x');
    try {
      size_t used = 0;
      if (x != std::string::npos) {
        int64_t r = std::stoll(s.substr(0, x), &used);
        if (used == x) {
          int64_t c = std::stoll(s.substr(x + 1), &used);
          if (used == s.size() - x - 1 && r > 0 && c > 0) return std::pair{r, c};
        }
      }
    } catch (const std::exception&) {
    }
    a.fail_value("block_structure", "two positive integers [rows, cols] (or the legacy string \"RxC\")");
  }
  std::vector<int64_t> dims = a.get_int_list("block_structure");
  if (dims.size() != 2 || dims[0] <= 0 || dims[1] <= 0)
    a.fail_value("block_structure", "two positive integers [rows, cols]");
  return std::pair{dims[0], dims[1]};
}

}  // namespace

QuantArgs parse_quant_args(const io::JsonView& a) {
  a.reject_unknown_keys({"num_bits", "type", "symmetric", "group_size", "strategy", "block_structure", "dynamic",
                         "actorder", "observer", "observer_kwargs", "scale_dtype", "zp_dtype"});
  QuantArgs q;
  q.num_bits = static_cast<int>(a.opt_int("num_bits").value_or(8));
  const std::string type = a.opt_string("type").value_or("int");
  if (type == "int") q.type = QuantType::Int;
  else if (type == "float") q.type = QuantType::Float;
  else a.fail_value("type", "\"int\" or \"float\"");
  q.symmetric = a.opt_bool("symmetric").value_or(true);
  q.group_size = a.opt_int("group_size");
  if (q.group_size && (*q.group_size < -1 || *q.group_size == 0))
    a.fail_value("group_size", "-1 (channel), a positive integer (group) or null");
  q.block_structure = parse_block(a);
  q.dynamic = parse_dynamic(a);
  q.actorder = parse_actorder(a);
  q.scale_dtype = a.opt_string("scale_dtype");
  if (auto s = a.opt_string("strategy")) {
    q.strategy = parse_strategy(a, *s);
  } else if (!q.group_size) {
    q.strategy = Strategy::Tensor;
  } else {
    q.strategy = *q.group_size > 0 ? Strategy::Group : Strategy::Channel;
  }

  // quant_args.py validators, in its order.
  const bool grouped = q.strategy == Strategy::Group || q.strategy == Strategy::TensorGroup;
  if (q.num_bits <= 0) a.fail_value("num_bits", "a positive integer");
  if (q.type == QuantType::Float && q.num_bits != 8 && q.num_bits != 4)
    a.fail_value("num_bits", "8 (FP8) or 4 (FP4) for type float");
  if (grouped && (!q.group_size || *q.group_size <= 0))
    a.fail_value("strategy", "a group_size > 0 to go with it",
                 fmt::format("strategy '{}' needs group_size > 0", strategy_name(q.strategy)));
  if (q.group_size && *q.group_size > 0 && !grouped)
    a.fail_value("group_size", "null or -1 unless strategy is group or tensor_group",
                 fmt::format("group_size {} requires strategy group or tensor_group, not '{}'", *q.group_size,
                             strategy_name(q.strategy)));
  if (q.group_size && *q.group_size == -1 && q.strategy != Strategy::Channel)
    a.fail_value("group_size", "-1 only with strategy channel");
  if (q.strategy == Strategy::Token && q.dynamic == Dynamic::Static)
    a.fail_value("strategy", "token only with dynamic = true", "per-token quantization must be dynamic");
  if ((q.strategy == Strategy::Block) != q.block_structure.has_value())
    a.fail_value(q.block_structure ? "block_structure" : "strategy",
                 "strategy block together with block_structure (and neither without the other)");
  if (q.actorder == ActOrder::Group && !grouped)
    a.fail_value("actorder", "null or weight unless strategy is group",
                 fmt::format("actorder group requires strategy group, not '{}'", strategy_name(q.strategy)));
  if (q.dynamic == Dynamic::Dynamic && !(q.strategy == Strategy::Token || q.strategy == Strategy::Tensor ||
                                         q.strategy == Strategy::TensorGroup || q.strategy == Strategy::Group))
    a.fail_value("dynamic", "false for this strategy",
                 fmt::format("dynamic quantization is not defined for strategy '{}'", strategy_name(q.strategy)));
  if (q.dynamic == Dynamic::Local && q.strategy != Strategy::TensorGroup)
    a.fail_value("dynamic", "\"local\" only with strategy tensor_group");
  return q;
}

}  // namespace qlm::ct
