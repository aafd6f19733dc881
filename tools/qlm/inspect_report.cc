#include "tools/qlm/inspect_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "config/hf_config.h"
#include "config/quant_config_source.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/verify.h"
#include "tools/qlm/inspect_quant.h"
#include "tools/qlm/inspect_tensors.h"

namespace qlm::cli {
namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr uint64_t kProgressMinBytes = uint64_t{256} << 20;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

template <typename T>
OrderedJson or_null(const std::optional<T>& value) {
  return value ? OrderedJson(*value) : OrderedJson();
}

OrderedJson config_section(const config::HfConfig& c) {
  OrderedJson j = OrderedJson::object();
  j["architectures"] = c.architectures;
  j["model_type"] = c.model_type;
  j["dtype"] = or_null(c.dtype);
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = or_null(c.intermediate_size);
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.resolved_head_dim();
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = or_null(c.max_position_embeddings);
  j["rms_norm_eps"] = or_null(c.rms_norm_eps);
  j["rope_theta"] = or_null(c.rope_theta);
  j["rope_scaling"] = c.rope_scaling ? OrderedJson(c.rope_scaling->json()) : OrderedJson();
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  return j;
}

// When config.json parses but fails validation: show the identifying fields as written.
OrderedJson lenient_config_section(const std::filesystem::path& model_dir) {
  OrderedJson j = OrderedJson::object();
  try {
    const nlohmann::json raw = io::read_json_file(model_dir / config::kConfigFileName);
    if (!raw.is_object()) return OrderedJson();
    for (const char* key : {"architectures", "model_type", "torch_dtype", "dtype", "num_hidden_layers", "hidden_size",
                            "intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size"}) {
      if (raw.contains(key)) j[key] = raw[key];
    }
  } catch (const Error&) {
    return OrderedJson();  // the load error is already reported
  }
  return j;
}

OrderedJson quant_section(const config::QuantConfigSource& source, std::vector<std::string>& warnings) {
  QuantSummary summary = summarize_quant_config(source.config);
  OrderedJson j = OrderedJson::object();
  j["quant_method"] = source.quant_method;
  j["origins"] = source.origins;
  j["fields"] = std::move(summary.fields);
  if (!summary.groups.empty()) j["config_groups"] = std::move(summary.groups);
  j["other_keys"] = summary.other_keys;
  j["config"] = source.config.json();
  warnings.insert(warnings.end(), source.warnings.begin(), source.warnings.end());
  warnings.insert(warnings.end(), summary.warnings.begin(), summary.warnings.end());
  return j;
}

OrderedJson tally_json(const Tally& t) { return OrderedJson{{"count", t.count}, {"bytes", t.bytes}}; }

OrderedJson tensor_section(const io::Checkpoint& checkpoint, const TensorSummary& summary) {
  OrderedJson j = OrderedJson::object();
  j["count"] = summary.count;
  j["files"] = checkpoint.files().size();
  j["bytes"] = summary.bytes;
  OrderedJson by_dtype = OrderedJson::object();
  for (int d = 0; d < kDTypeCount; ++d) {
    if (summary.by_dtype[d].count > 0) by_dtype[std::string(dtype_name(static_cast<DType>(d)))] = tally_json(summary.by_dtype[d]);
  }
  j["by_dtype"] = std::move(by_dtype);
  OrderedJson by_format = OrderedJson::object();
  for (size_t f = 0; f < kTensorFormatCount; ++f) {
    const Tally& t = summary.by_format[f];
    if (t.count == 0) continue;
    OrderedJson entry = tally_json(t);
    entry["label"] = tensor_format_label(static_cast<TensorFormat>(f));
    by_format[std::string(tensor_format_key(static_cast<TensorFormat>(f)))] = std::move(entry);
  }
  j["by_format"] = std::move(by_format);
  return j;
}

TensorSummary summarize_checkpoint(const io::Checkpoint& checkpoint) {
  std::vector<TensorEntry> entries;
  for (const auto& file : checkpoint.files()) {
    for (const io::TensorInfo& t : file->tensors()) entries.push_back({t.name, t.dtype, t.nbytes()});
  }
  return summarize_tensors(entries);
}

uint64_t format_count(const TensorSummary& s, TensorFormat f) { return s.by_format[static_cast<size_t>(f)].count; }

// Quantization config versus the tensors actually present.
void cross_check(const std::string& method, const TensorSummary& s, std::vector<std::string>& warnings) {
  const std::string m = lower(method);
  const uint64_t packed = format_count(s, TensorFormat::GptqAwqPacked);
  const uint64_t ct = format_count(s, TensorFormat::CompressedTensorsPacked);
  const uint64_t fp8 = format_count(s, TensorFormat::Fp8);
  const uint64_t int8 = format_count(s, TensorFormat::Int8);
  const uint64_t bnb = format_count(s, TensorFormat::Bitsandbytes);
  const bool gptq_like = m.find("gptq") != std::string::npos || m.find("awq") != std::string::npos ||
                         m == "marlin" || m == "moe_wna16" || m == "auto-round";
  if (gptq_like && packed == 0)
    warnings.push_back(fmt::format("quant_method is \"{}\" but the checkpoint has no .qweight tensors", method));
  if (m == "compressed-tensors" && ct + fp8 + int8 == 0)
    warnings.push_back(
        "quant_method is \"compressed-tensors\" but no .weight_packed, FP8 or INT8 weights are present");
  if (m == "fp8" && fp8 == 0)
    warnings.push_back("quant_method is \"fp8\" but no FP8 weights are present (the weights would be quantized at "
                       "load time)");
  if (m == "bitsandbytes" && bnb == 0)
    warnings.push_back("quant_method is \"bitsandbytes\" but no bitsandbytes state tensors (.absmax, .SCB, "
                       ".quant_state.*) are present (the weights would be quantized at load time)");
  if (m.starts_with("modelopt") && fp8 + ct + int8 + format_count(s, TensorFormat::Other) == 0)
    warnings.push_back(fmt::format("quant_method is \"{}\" but no FP8 or packed FP4 weights are present", method));
  if (!gptq_like && packed > 0)
    warnings.push_back(fmt::format("{} GPTQ/AWQ tensors (.qweight, ...) are present but quant_method is \"{}\"",
                                   packed, method));
}

// config.json's dtype versus the dtype of the dense tensors.
void check_dense_dtype(const std::optional<std::string>& config_dtype, const TensorSummary& s,
                       std::vector<std::string>& warnings) {
  if (!config_dtype || format_count(s, TensorFormat::Dense) == 0) return;
  std::optional<DType> expected;
  if (*config_dtype == "float16") expected = DType::F16;
  if (*config_dtype == "bfloat16") expected = DType::BF16;
  if (*config_dtype == "float32") expected = DType::F32;
  if (!expected || s.dense_by_dtype[static_cast<size_t>(*expected)].count > 0) return;
  std::vector<std::string> found;
  for (int d = 0; d < kDTypeCount; ++d) {
    if (s.dense_by_dtype[d].count > 0) found.emplace_back(dtype_name(static_cast<DType>(d)));
  }
  warnings.push_back(fmt::format("config.json says dtype \"{}\" but the dense tensors are {}", *config_dtype,
                                 fmt::join(found, ", ")));
}

OrderedJson verify_section(const io::Checkpoint& checkpoint, bool show_progress) {
  io::VerifyProgress progress;
  if (show_progress) {
    progress = [](uint64_t done, uint64_t total) {
      if (total < kProgressMinBytes) return;
      std::fprintf(stderr, "\rverify-data: %.2f / %.2f GB (%3.0f%%)", done / 1e9, total / 1e9,
                   100.0 * static_cast<double>(done) / static_cast<double>(total));
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  const io::VerifyReport report = io::verify_checkpoint_data(checkpoint, progress);
  OrderedJson j = OrderedJson::object();
  j["bytes"] = report.bytes;
  j["seconds"] = report.seconds;
  j["gigabytes_per_second"] = report.gigabytes_per_second;
  OrderedJson files = OrderedJson::array();
  for (const io::FileChecksum& f : report.files)
    files.push_back({{"file", f.file}, {"bytes", f.bytes}, {"checksum", fmt::format("{:016x}", f.checksum)}});
  j["files"] = std::move(files);
  return j;
}

}  // namespace

OrderedJson build_inspect_report(const InspectOptions& options) {
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
  // A malformed config.json fails both the config and the quantization lookup: report it once.
  auto add_error = [&errors](const Error& e) {
    if (std::find(errors.begin(), errors.end(), e.what()) == errors.end()) errors.emplace_back(e.what());
  };
  OrderedJson report = OrderedJson::object();
  report["model_dir"] = options.model_dir.string();

  std::optional<config::HfConfig> hf;
  try {
    hf = config::HfConfig::load(options.model_dir);
    report["config"] = config_section(*hf);
  } catch (const Error& e) {
    add_error(e);
    report["config"] = lenient_config_section(options.model_dir);
  }

  std::optional<config::QuantConfigSource> quant;
  bool quant_ok = true;
  try {
    quant = config::find_quant_config(options.model_dir);
    report["quantization"] = quant ? quant_section(*quant, warnings) : OrderedJson();
  } catch (const Error& e) {
    quant_ok = false;
    add_error(e);
    report["quantization"] = OrderedJson();
  }

  std::optional<io::Checkpoint> checkpoint;
  try {
    checkpoint = io::Checkpoint::open(options.model_dir);
  } catch (const Error& e) {
    add_error(e);
  }
  if (checkpoint) {
    const TensorSummary summary = summarize_checkpoint(*checkpoint);
    report["tensors"] = tensor_section(*checkpoint, summary);
    warnings.insert(warnings.end(), checkpoint->warnings().begin(), checkpoint->warnings().end());
    warnings.insert(warnings.end(), summary.warnings.begin(), summary.warnings.end());
    if (quant) cross_check(quant->quant_method, summary, warnings);
    if (hf) check_dense_dtype(hf->dtype, summary, warnings);
    if (quant_ok) {
      try {
        config::check_quantized_tensors_have_config(quant, checkpoint->tensor_names(), options.model_dir);
      } catch (const Error& e) {
        add_error(e);
      }
    }
    if (options.verify_data) {
      try {
        report["verify"] = verify_section(*checkpoint, options.progress);
      } catch (const Error& e) {
        add_error(e);
      }
    }
  } else {
    report["tensors"] = OrderedJson();
  }
  report["warnings"] = warnings;
  report["errors"] = errors;
  return report;
}

}  // namespace qlm::cli
