// `qlm generate MODEL --prompt TEXT [...]`: streams the continuation to stdout as it decodes
// (UTF-8-safe), then reports load time, prefill and decode tokens/s and the methods and kernels in
// use on stderr.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "runtime/generation.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tools/qlm/commands.h"
#include "tools/qlm/load_progress.h"
#include "tools/qlm/model_options.h"
#include "tools/qlm/tp_launch.h"

namespace qlm::cli {
namespace {

struct GenerateArgs {
  ModelCliOptions model;
  std::string prompt;
  int64_t max_tokens = 128;
  float temperature = 0.0f;
  int64_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
};

void write_out(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void run_generate(const GenerateArgs& args) {
  runtime::ModelOptions options = to_model_options(args.model);
  const runtime::SamplingParams sampling{.temperature = args.temperature, .top_k = args.top_k, .top_p = args.top_p,
                                         .seed = args.seed};
  runtime::validate(sampling);
  const std::unique_ptr<runtime::Tokenizer> tokenizer = runtime::Tokenizer::from_model_dir(args.model.model_dir);
  TpLaunch launch = TpLaunch::start(args.model, options);
  const bool prints = prints_results(args.model);  // rank 0 only in a multi-process group
  const std::unique_ptr<runtime::Model> model = load_model_with_progress(args.model.model_dir, options);

  const std::vector<int32_t> prompt = tokenizer->encode(args.prompt, /*add_special_tokens=*/true);
  runtime::GenerationOptions gen{.max_tokens = args.max_tokens, .sampling = sampling, .eos_ids = tokenizer->eos_ids()};
  runtime::StreamDecoder decoder(*tokenizer);
  const runtime::GenerationResult result = runtime::generate(*model, prompt, gen, [&](int32_t id) {
    if (prints) write_out(decoder.push(id));
  });
  launch.finish(*model);
  if (!prints) return;
  write_out(decoder.finish() + "\n");

  const runtime::GenerationStats& s = result.stats;
  std::fprintf(stderr, "load: %.2f s (%s)\n", model->load_seconds(), model->load_report().summary().c_str());
  for (const std::string& warning : model->load_report().warnings) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  std::fprintf(stderr, "prefill: %lld tokens, %.1f tokens/s\n", static_cast<long long>(s.prompt_tokens),
               s.prefill_tokens_per_second());
  std::fprintf(stderr, "decode: %lld tokens, %.1f tokens/s%s\n", static_cast<long long>(s.generated_tokens),
               s.decode_tokens_per_second(), result.stopped_at_eos ? " (stopped at eos)" : "");
  std::fprintf(stderr, "device: %s, activations %s\n", model->device().str().c_str(),
               std::string(dtype_name(model->act_dtype())).c_str());
  std::fprintf(stderr, "%s\n", model->kv_cache_report().c_str());
  std::fprintf(stderr, "layers: %s\n", model->plan().summary().c_str());
  if (!model->decode_graph_status().empty())
    std::fprintf(stderr, "decode step: %s%s\n", model->decode_graph_status().c_str(),
                 result.chosen_on_device ? ", greedy tokens chosen on the GPU with steps queued ahead" : "");
  if (const std::string router = model->moe_router_status(); !router.empty())
    std::fprintf(stderr, "MoE router at decode: %s\n", router.c_str());
  if (model->tp() > 1)
    std::fprintf(stderr, "tensor parallel: %d ranks, %s\n", model->tp(),
                 model->joined_group() ? "one process per GPU" : "in this process");
}

}  // namespace

void register_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text from a prompt, streaming it to stdout");
  add_model_options(cmd, args->model);
  cmd->add_option("--prompt", args->prompt, "Prompt text")->required();
  cmd->add_option("--max-tokens", args->max_tokens, "Most new tokens to generate")->default_str("128");
  cmd->add_option("--temperature", args->temperature, "Sampling temperature; 0 is greedy")->default_str("0");
  cmd->add_option("--top-k", args->top_k, "Keep the k most likely tokens (0: all)")->default_str("0");
  cmd->add_option("--top-p", args->top_p, "Keep the smallest set of tokens with this probability mass")->default_str("1");
  cmd->add_option("--seed", args->seed, "Random seed for sampling")->default_str("0");
  cmd->callback([args] { run_as_rank(args->model, [&] { run_generate(*args); }); });
}

}  // namespace qlm::cli
