#include "models/model_config.h"

#include <cmath>

#include "core/error.h"

namespace qlm::models {

namespace {

DType dtype_from_config(const std::optional<std::string>& name) {
  if (!name || *name == "float32") return DType::F32;
  if (*name == "float16") return DType::F16;
  if (*name == "bfloat16") return DType::BF16;
  return DType::F32;  // anything else is only a hint; tensors carry their own dtype
}

ops::RopeParams rope_from_config(const config::HfConfig& hf, int64_t head_dim) {
  const io::JsonView& c = hf.text;
  ops::RopeParams p;
  p.theta = hf.rope_theta.value_or(10000.0);
  p.head_dim = head_dim;
  const double partial = c.opt_number("partial_rotary_factor").value_or(1.0);
  if (!(partial > 0.0 && partial <= 1.0)) c.fail_value("partial_rotary_factor", "a number in (0, 1]");
  p.rotary_dim = static_cast<int64_t>(static_cast<double>(head_dim) * partial);
  if (p.rotary_dim < 2 || p.rotary_dim % 2 != 0)
    c.fail_value("partial_rotary_factor", fmt::format("a factor giving an even rotary dimension of head_dim {}", head_dim));
  p.max_position_embeddings = hf.max_position_embeddings.value_or(2048);
  if (!hf.rope_scaling) return p;

  const io::JsonView& s = *hf.rope_scaling;
  std::optional<std::string> type = s.opt_string("rope_type");
  if (!type) type = s.opt_string("type");
  if (!type || *type == "default") return p;
  auto positive = [&](std::string_view key) {
    const double v = s.get_number(key);
    if (!(v > 0) || !std::isfinite(v)) s.fail_value(key, "a positive number");
    return v;
  };
  if (*type == "linear") {
    p.type = ops::RopeType::Linear;
    p.factor = positive("factor");
  } else if (*type == "dynamic") {
    p.type = ops::RopeType::Dynamic;
    p.factor = positive("factor");
    if (!hf.max_position_embeddings)
      fail("config.missing_key", {.file = hf.raw.source(), .tensor = {}, .layer = {}},
           "add max_position_embeddings to config.json", "rope_scaling type 'dynamic' needs max_position_embeddings");
    if (p.rotary_dim <= 2) s.fail_value("rope_type", "a rotary dimension above 2 for dynamic scaling");
  } else if (*type == "llama3") {
    p.type = ops::RopeType::Llama3;
    p.factor = positive("factor");
    p.low_freq_factor = positive("low_freq_factor");
    p.high_freq_factor = positive("high_freq_factor");
    p.original_max_position_embeddings = s.get_int("original_max_position_embeddings");
    if (p.original_max_position_embeddings <= 0) s.fail_value("original_max_position_embeddings", "a positive integer");
    if (p.high_freq_factor == p.low_freq_factor) s.fail_value("high_freq_factor", "a value other than low_freq_factor");
  } else {
    fail("config.unsupported", {.file = s.source(), .tensor = {}, .layer = {}},
         "use a model whose rope_scaling is default, linear, dynamic or llama3",
         "{} = '{}' is not supported; expected one of default, linear, dynamic, llama3", s.key_path("rope_type"),
         *type);
  }
  return p;
}

}  // namespace

ModelConfig llama_family_config(const config::HfConfig& hf, double default_eps) {
  ModelConfig m;
  m.hidden_size = hf.hidden_size;
  m.num_layers = hf.num_hidden_layers;
  m.num_heads = hf.num_attention_heads;
  m.num_kv_heads = hf.num_key_value_heads;
  m.head_dim = hf.resolved_head_dim();
  m.vocab_size = hf.vocab_size;
  if (!hf.intermediate_size)
    fail("config.missing_key", {.file = hf.raw.source(), .tensor = {}, .layer = {}}, "add intermediate_size to config.json",
         "intermediate_size is required for {}", hf.architectures.empty() ? "this model" : hf.architectures.front());
  m.intermediate_size = *hf.intermediate_size;
  m.rms_norm_eps = hf.rms_norm_eps.value_or(default_eps);
  m.rope = rope_from_config(hf, m.head_dim);
  m.tie_word_embeddings = hf.tie_word_embeddings;
  m.sliding_window.assign(static_cast<size_t>(m.num_layers), 0);
  m.dtype = dtype_from_config(hf.dtype);
  if (const auto act = hf.text.opt_string("hidden_act"); act && *act != "silu")
    hf.text.fail_value("hidden_act", "\"silu\" (the only activation of the Llama family)");
  return m;
}

std::vector<int64_t> windows_from_layer_types(const config::HfConfig& hf, int64_t num_layers) {
  std::vector<int64_t> windows(static_cast<size_t>(num_layers), 0);
  const io::JsonView& c = hf.text;
  const std::optional<int64_t> window = c.opt_int("sliding_window");
  if (!window || !c.opt_bool("use_sliding_window").value_or(true)) return windows;
  if (*window <= 0) c.fail_value("sliding_window", "a positive integer or null");
  if (const auto types = c.opt_string_list("layer_types")) {
    if (static_cast<int64_t>(types->size()) != num_layers)
      c.fail_value("layer_types", fmt::format("one entry per layer ({})", num_layers));
    for (size_t i = 0; i < types->size(); ++i) {
      if ((*types)[i] == "sliding_attention") windows[i] = *window;
      else if ((*types)[i] != "full_attention") c.fail_value("layer_types", "\"sliding_attention\" or \"full_attention\"");
    }
    return windows;
  }
  // Older configs: layers from max_window_layers on use the window.
  const int64_t first = c.opt_int("max_window_layers").value_or(0);
  for (int64_t i = first; i < num_layers; ++i) windows[static_cast<size_t>(i)] = *window;
  return windows;
}

}  // namespace qlm::models
