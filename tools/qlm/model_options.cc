#include "tools/qlm/model_options.h"

#include <charconv>

#include "core/error.h"

namespace qlm::cli {

void add_model_options(CLI::App* cmd, ModelCliOptions& o) {
  cmd->add_option("MODEL", o.model_dir, "Model directory (config.json + safetensors)")->required();
  cmd->add_option("--device", o.device, "cpu or cuda[:N]")->default_str("cpu");
  cmd->add_option("--threads", o.threads, "Compute threads (0: all cores)")->default_str("0");
  cmd->add_option("--tp", o.tp, "Tensor-parallel ranks (in-process on CPU)")->default_str("1");
  cmd->add_option("--linear-backend", o.linear_backend, "Kernel backend or kernel name for linear layers")
      ->default_str("auto");
  cmd->add_option("--quant-plugin", o.quant_plugins, "Shared library registering quantization formats or kernels");
  cmd->add_option("--quantization", o.quantization, "Quantization format to use instead of the checkpoint's (same family)");
  cmd->add_option("--kv-cache-dtype", o.kv_dtype,
                  "KV-cache storage: auto (the activation dtype), f32, f16, bf16, fp8 (= fp8_e4m3), fp8_e4m3 or fp8_e5m2")
      ->default_str("auto");
  cmd->add_option("--dtype", o.dtype, "Activation dtype on cuda: bf16 (default), f16 or f32; cpu runs f32 only");
}

namespace {
Device parse_device(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    int index = -1;
    const char* begin = text.data() + 5;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(begin, end, index);
    if (ec == std::errc() && ptr == end && index >= 0) return Device::cuda(index);
  }
  fail("cli.device", {}, "use --device cpu or --device cuda[:N]", "unknown device '{}'", text);
}

DType parse_act_dtype(const std::string& text) {
  if (text == "bf16" || text == "bfloat16") return DType::BF16;
  if (text == "f16" || text == "fp16" || text == "float16") return DType::F16;
  if (text == "f32" || text == "fp32" || text == "float32") return DType::F32;
  fail("cli.dtype", {}, "use --dtype bf16, f16 or f32", "unknown activation dtype '{}'", text);
}
}  // namespace

runtime::ModelOptions to_model_options(const ModelCliOptions& o) {
  runtime::ModelOptions m;
  m.device = parse_device(o.device);
  m.threads = o.threads;
  m.tp = o.tp;
  m.kernels.linear_backend = o.linear_backend;
  m.quant_plugins = o.quant_plugins;
  if (!o.quantization.empty()) m.quantization = o.quantization;
  m.kv_cache_dtype = parse_kv_cache_dtype(o.kv_dtype);
  if (!o.dtype.empty()) m.act_dtype = parse_act_dtype(o.dtype);
  runtime::activation_dtype(m);  // rejects bf16 / f16 on cpu before anything loads
  return m;
}

}  // namespace qlm::cli
