// The generation loop: one prefill forward over the prompt, then one forward per new token, with
// the sampler choosing each token from the last logits. Greedy decoding on a model that can (Model::decode_greedy:
// CUDA graph steps queued ahead of the host) takes the tokens after the first from the device instead — the same
// tokens. Timing is kept for the CLI's report.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "runtime/model.h"
#include "runtime/sampling.h"

namespace qlm::runtime {

struct GenerationOptions {
  int64_t max_tokens = 128;
  SamplingParams sampling{};
  std::vector<int32_t> eos_ids{};  // generation stops after producing one of these (it is returned)
};

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t decode_steps = 0;  // forwards after the prefill
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // new tokens only
  bool stopped_at_eos = false;
  bool chosen_on_device = false;  // the tokens after the first chosen by the GPU (Model::decode_greedy)
  GenerationStats stats;
};

// Continues `prompt` from an empty sequence (the model is reset first). `on_token` sees every new
// token as soon as it is chosen. Throws "generate.prompt" for an empty prompt.
GenerationResult generate(Model& model, std::span<const int32_t> prompt, const GenerationOptions& options,
                          const std::function<void(int32_t)>& on_token = {});

}  // namespace qlm::runtime
