// Next-token choice from logits, in the order transformers applies its warpers: temperature, then
// top-k, then top-p (nucleus), then a draw from the renormalised distribution. Temperature 0 is
// greedy (the first index of the largest logit). Seeded with std::mt19937_64, so a seed gives the
// same tokens on every platform (the uniform draw is built from the raw 64-bit output).
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace qlm::runtime {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int64_t top_k = 0;         // 0: no limit
  float top_p = 1.0f;        // 1: no limit
  uint64_t seed = 0;
};

// "sampling.params" for a negative temperature or top_k, or top_p outside (0, 1].
void validate(const SamplingParams& params);

// Index of the largest value (the first one on ties); NaN never wins.
int32_t argmax(std::span<const float> logits);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  const SamplingParams& params() const { return params_; }
  int32_t sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace qlm::runtime
