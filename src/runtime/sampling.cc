#include "runtime/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace qlm::runtime {

void validate(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    fail("sampling.params", {}, "use --temperature 0 for greedy decoding or a positive value",
         "temperature must be a finite number >= 0, got {}", p.temperature);
  if (p.top_k < 0) fail("sampling.params", {}, "use --top-k 0 for no limit", "top_k must be >= 0, got {}", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    fail("sampling.params", {}, "use --top-p 1 for no limit", "top_p must be in (0, 1], got {}", p.top_p);
}

int32_t argmax(std::span<const float> logits) {
  QLM_CHECK(!logits.empty());
  int32_t best = 0;
  float best_value = -INFINITY;
  bool found = false;
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i]) && (!found || logits[i] > best_value)) {
      best = static_cast<int32_t>(i);
      best_value = logits[i];
      found = true;
    }
  return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) { validate(params); }

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.temperature == 0.0f || params_.top_k == 1) return argmax(logits);
  const size_t n = logits.size();
  // Candidates sorted by logit, descending (ties: lower id first), NaN removed.
  std::vector<int32_t> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (!std::isnan(logits[i])) ids.push_back(static_cast<int32_t>(i));
  QLM_CHECK(!ids.empty());
  auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  size_t keep = ids.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(), by_logit);
    ids.resize(keep);
  } else {
    std::sort(ids.begin(), ids.end(), by_logit);
  }
  // Softmax of logit / temperature over the candidates, in double.
  const double inv_t = 1.0 / params_.temperature;
  const double top = logits[ids.front()] * inv_t;
  std::vector<double> probs(ids.size());
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) sum += probs[i] = std::exp(logits[ids[i]] * inv_t - top);
  for (double& p : probs) p /= sum;
  // Nucleus: the shortest prefix whose mass reaches top_p (at least one token).
  if (params_.top_p < 1.0f) {
    double mass = 0;
    size_t cut = 0;
    while (cut < probs.size()) {
      mass += probs[cut++];
      if (mass >= params_.top_p) break;
    }
    probs.resize(cut);
    ids.resize(cut);
  }
  const double total = std::accumulate(probs.begin(), probs.end(), 0.0);
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;  // uniform in [0, total)
  double acc = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    acc += probs[i];
    if (u < acc) return ids[i];
  }
  return ids.back();
}

}  // namespace qlm::runtime
