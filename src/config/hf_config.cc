#include "config/hf_config.h"

#include "core/error.h"

namespace qlm::config {
namespace {

int64_t positive_int(const io::JsonView& view, std::string_view key) {
  const int64_t value = view.get_int(key);
  if (value <= 0) view.fail_value(key, "a positive integer");
  return value;
}

std::optional<int64_t> opt_positive_int(const io::JsonView& view, std::string_view key) {
  std::optional<int64_t> value = view.opt_int(key);
  if (value && *value <= 0) view.fail_value(key, "a positive integer");
  return value;
}

// HF wrote "torch_dtype" until transformers 4.56 and "dtype" since; some files carry both.
std::optional<std::string> read_dtype(const io::JsonView& view) {
  std::optional<std::string> torch_dtype = view.opt_string("torch_dtype");
  std::optional<std::string> dtype = view.opt_string("dtype");
  if (torch_dtype && dtype && *torch_dtype != *dtype) {
    ErrorContext context;
    context.file = view.source();
    fail("config.conflict", context, "remove one of the two keys", "{} = \"{}\" but {} = \"{}\"",
         view.key_path("torch_dtype"), *torch_dtype, view.key_path("dtype"), *dtype);
  }
  return dtype ? dtype : torch_dtype;
}

}  // namespace

int64_t HfConfig::resolved_head_dim() const {
  return head_dim ? *head_dim : hidden_size / num_attention_heads;
}

HfConfig HfConfig::from_json(const io::JsonView& config_json) {
  HfConfig c;
  c.raw = config_json;
  c.text = config_json;
  bool nested = false;
  if (!config_json.has("hidden_size")) {
    if (std::optional<io::JsonView> text_config = config_json.opt_object("text_config")) {
      c.text = *text_config;
      nested = true;
    }
  }
  const io::JsonView& t = c.text;

  c.architectures = config_json.opt_string_list("architectures").value_or(std::vector<std::string>{});
  c.model_type = config_json.get_string("model_type");
  c.dtype = read_dtype(config_json);
  if (!c.dtype && nested) c.dtype = read_dtype(t);

  c.hidden_size = positive_int(t, "hidden_size");
  c.num_hidden_layers = positive_int(t, "num_hidden_layers");
  c.num_attention_heads = positive_int(t, "num_attention_heads");
  c.num_key_value_heads = opt_positive_int(t, "num_key_value_heads").value_or(c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    t.fail_value("num_key_value_heads",
                 fmt::format("a divisor of num_attention_heads ({})", c.num_attention_heads));
  c.vocab_size = positive_int(t, "vocab_size");
  c.intermediate_size = opt_positive_int(t, "intermediate_size");
  c.head_dim = opt_positive_int(t, "head_dim");
  if (!c.head_dim && c.hidden_size % c.num_attention_heads != 0)
    t.fail_value("hidden_size", fmt::format("a multiple of num_attention_heads ({}) when head_dim is absent",
                                            c.num_attention_heads));
  c.max_position_embeddings = opt_positive_int(t, "max_position_embeddings");
  c.rms_norm_eps = t.opt_number("rms_norm_eps");

  std::optional<io::JsonView> rope_parameters = t.opt_object("rope_parameters");
  c.rope_theta = t.opt_number("rope_theta");
  if (!c.rope_theta && rope_parameters) c.rope_theta = rope_parameters->opt_number("rope_theta");
  c.rope_scaling = t.opt_object("rope_scaling");
  if (!c.rope_scaling) c.rope_scaling = rope_parameters;

  std::optional<bool> tie = t.opt_bool("tie_word_embeddings");
  if (!tie) tie = config_json.opt_bool("tie_word_embeddings");
  c.tie_word_embeddings = tie.value_or(false);

  c.quantization_config = config_json.opt_object("quantization_config");
  return c;
}

HfConfig HfConfig::load(const std::filesystem::path& model_dir) {
  return from_json(io::JsonView::from_file(model_dir / kConfigFileName));
}

}  // namespace qlm::config
