#include "runtime/tokenizer/post_processor.h"

namespace qlm::runtime::tok {
namespace {

// ["<s>", 1] in Roberta/Bert processors.
int32_t token_pair_id(const Field& pair) {
  if (pair.size() != 2) pair.fail_value("expected [token, id]");
  return static_cast<int32_t>(pair.at(size_t{1}).as_int());
}

}  // namespace

PostProcessor::PostProcessor(const Field& field) {
  if (!field.is_null()) load(field);
}

void PostProcessor::load(const Field& field) {
  const std::string type = field.type_name();
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "Sequence") {
    const Field list = field.at("processors");
    for (size_t i = 0; i < list.size(); ++i) load(list.at(i));
    return;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    prefix_.insert(prefix_.begin(), token_pair_id(field.at("cls")));
    suffix_.push_back(token_pair_id(field.at("sep")));
    return;
  }
  if (type != "TemplateProcessing") field.fail_unsupported("post_processor type \"" + type + "\"");

  const Field specials = field.at("special_tokens");
  specials.require_object();
  const Field single = field.at("single");
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const Field item = single.at(i);
    if (item.has("Sequence")) {
      const std::string which = item.at("Sequence").string_at("id");
      if (which != "A" || seen_sequence) item.fail_value("the single template must contain $A exactly once");
      seen_sequence = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").string_at("id");
    if (!specials.has(name)) item.fail_value("special token \"" + name + "\" is not in special_tokens");
    const Field ids = specials.at(name).at("ids");
    std::vector<int32_t>& target = seen_sequence ? after : before;
    for (size_t j = 0; j < ids.size(); ++j) target.push_back(static_cast<int32_t>(ids.at(j).as_int()));
  }
  if (!seen_sequence) single.fail_value("the single template has no $A");
  // A later processor of a Sequence wraps the output of the earlier ones.
  prefix_.insert(prefix_.begin(), before.begin(), before.end());
  suffix_.insert(suffix_.end(), after.begin(), after.end());
}

std::vector<int32_t> PostProcessor::apply(std::vector<int32_t> ids) const {
  if (prefix_.empty() && suffix_.empty()) return ids;
  std::vector<int32_t> out;
  out.reserve(prefix_.size() + ids.size() + suffix_.size());
  out.insert(out.end(), prefix_.begin(), prefix_.end());
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

std::optional<int32_t> PostProcessor::leading_token() const {
  if (prefix_.empty()) return std::nullopt;
  return prefix_.front();
}

}  // namespace qlm::runtime::tok
