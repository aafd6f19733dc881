#include "runtime/generation.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace qlm::runtime {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
std::span<const float> row(const Tensor& logits) {
  return {logits.data<float>() + (logits.size(0) - 1) * logits.size(1), static_cast<size_t>(logits.size(1))};
}
}  // namespace

double GenerationStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0;
}
double GenerationStats::decode_tokens_per_second() const {
  return decode_seconds > 0 ? static_cast<double>(decode_steps) / decode_seconds : 0;
}

GenerationResult generate(Model& model, std::span<const int32_t> prompt, const GenerationOptions& options,
                          const std::function<void(int32_t)>& on_token) {
  if (prompt.empty())
    fail("generate.prompt", {}, "give a prompt that encodes to at least one token", "the prompt has no tokens");
  Sampler sampler(options.sampling);
  GenerationResult result;
  result.stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  model.reset();
  if (options.max_tokens <= 0) return result;

  auto start = Clock::now();
  Tensor logits = model.forward(prompt, /*all_logits=*/false);
  result.stats.prefill_seconds = since(start);
  start = Clock::now();
  // Keeps a chosen token; false: generation stops after it (an EOS id, or max_tokens reached).
  const auto take = [&](int32_t chosen) {
    result.tokens.push_back(chosen);
    ++result.stats.generated_tokens;
    if (on_token) on_token(chosen);
    if (std::find(options.eos_ids.begin(), options.eos_ids.end(), chosen) != options.eos_ids.end()) {
      result.stopped_at_eos = true;
      return false;
    }
    return result.stats.generated_tokens < options.max_tokens;
  };
  // Ranks of a multi-process TP group continue with rank 0's choice (identity in one process).
  int32_t next = model.agree_on_token(sampler.sample(row(logits)));
  bool more = take(next);
  // Greedy on a model that can choose on the device: the tokens after the first with the host out of the loop
  // (the same tokens: the device takes runtime::argmax's choice; Model::decode_greedy). Otherwise the host loop.
  if (more && options.sampling.temperature == 0.0f) {
    if (const std::optional<int64_t> steps =
            model.decode_greedy(next, options.max_tokens - result.stats.generated_tokens, take)) {
      result.chosen_on_device = true;
      result.stats.decode_steps = *steps;
      more = false;
    }
  }
  while (more) {
    const int32_t token[1] = {next};
    logits = model.forward(token, false);
    ++result.stats.decode_steps;
    next = model.agree_on_token(sampler.sample(row(logits)));
    more = take(next);
  }
  result.stats.decode_seconds = since(start);
  return result;
}

}  // namespace qlm::runtime
