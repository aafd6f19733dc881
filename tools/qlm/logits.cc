// `qlm logits MODEL --tokens "ID ID ID…" --out FILE.safetensors`: runs one sequence and writes ONE
// float32 tensor named `logits`, shape [T, vocab], the logits at every position. The contract is
// fixed: outside comparisons depend on it.
#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <memory>

#include "io/safetensors.h"
#include "runtime/model.h"
#include "tools/qlm/commands.h"
#include "tools/qlm/load_progress.h"
#include "tools/qlm/model_options.h"
#include "tools/qlm/tp_launch.h"

namespace qlm::cli {
namespace {

struct LogitsArgs {
  ModelCliOptions model;
  std::string tokens;
  std::string out;
};

// Token ids separated by spaces and/or commas.
std::vector<int32_t> parse_tokens(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == ',' || c == '\t' || c == '\n') {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && text[end] != ' ' && text[end] != ',' && text[end] != '\t' && text[end] != '\n') ++end;
    int32_t id = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + i, text.data() + end, id);
    if (ec != std::errc() || ptr != text.data() + end || id < 0)
      fail("cli.tokens", {}, "pass non-negative integer token ids separated by spaces, e.g. --tokens \"1 15043 29892\"",
           "'{}' is not a token id", text.substr(i, end - i));
    ids.push_back(id);
    i = end;
  }
  if (ids.empty()) fail("cli.tokens", {}, "pass at least one token id", "--tokens is empty");
  return ids;
}

void run_logits(const LogitsArgs& args) {
  const std::vector<int32_t> tokens = parse_tokens(args.tokens);
  runtime::ModelOptions options = to_model_options(args.model);
  TpLaunch launch = TpLaunch::start(args.model, options);
  const std::unique_ptr<runtime::Model> model = load_model_with_progress(args.model.model_dir, options);
  const Tensor logits = model->forward(tokens, /*all_logits=*/true);
  launch.finish(*model);
  if (!prints_results(args.model)) return;  // rank 0 of a multi-process group writes the file
  io::write_safetensors(args.out, {{"logits", logits}});
  std::fprintf(stderr, "%s\n", model->kv_cache_report().c_str());
  std::fprintf(stderr, "wrote %s: logits F32[%lld, %lld]; %s, activations %s; layers: %s\n", args.out.c_str(),
               static_cast<long long>(logits.size(0)), static_cast<long long>(logits.size(1)),
               model->device().str().c_str(), std::string(dtype_name(model->act_dtype())).c_str(),
               model->plan().summary().c_str());
}

}  // namespace

void register_logits_command(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  auto* cmd = app.add_subcommand("logits", "Write the logits of every position of one token sequence to safetensors");
  add_model_options(cmd, args->model);
  cmd->add_option("--tokens", args->tokens, "Token ids, e.g. \"1 15043 29892\"")->required();
  cmd->add_option("--out", args->out, "Output .safetensors file (one F32 tensor 'logits' [T, vocab])")->required();
  cmd->callback([args] { run_as_rank(args->model, [&] { run_logits(*args); }); });
}

}  // namespace qlm::cli
