// Timing-based choice among the algorithms cuBLASLt's heuristic offers for one GEMM (LtGemm).
// The heuristic's first answer is not always the fastest kernel it has for a shape: tuning times
// every candidate once, on the call's own operands with a cold L2 (weights of a real model are
// not cache-resident), and keeps the fastest. Choices are shared process-wide per (device, GEMM
// signature, M), so the 32 same-shaped layers of a model tune once.
//
// Tuning synchronises the stream once per signature and M (a few milliseconds); it never runs
// while the stream is being captured into a CUDA graph (the heuristic's first algorithm runs
// then, untuned, and a later eager call tunes). Different algorithms sum in different orders, so
// a tuned GEMM is reproducible within a process but may differ from an untuned one in the last
// bits; QLM_LT_AUTOTUNE=0 turns tuning off everywhere, =1 on for every cuBLASLt GEMM (unset: the
// GEMM's own default, LtGemmSpec::autotune); QLM_LT_AUTOTUNE_LOG=1 prints each candidate's time.
// Only for QLM_WITH_CUDA builds.
#pragma once

#include <cublasLt.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cuda/context.h"

namespace qlm::cuda {

// Whether a GEMM whose own default is `spec_default` tunes (QLM_LT_AUTOTUNE overrides).
bool lt_autotune_enabled(bool spec_default);

// Candidates requested from the heuristic when tuning.
constexpr int kLtTuneCandidates = 12;

// Device microseconds of each candidate i in [0, n): `launch(i)` enqueues candidate i on
// ctx.stream and returns false when cuBLASLt refuses it (its time is then +infinity). Each
// candidate runs once to warm up, then `reps` times, each after an L2 flush outside the timed
// range; the median of the reps. Synchronises the stream.
std::vector<double> time_lt_candidates(Context& ctx, int n, const std::function<bool(int)>& launch, int reps = 5);

// Index of the smallest finite time, or -1 when none is finite.
int fastest_candidate(const std::vector<double>& us);

// Process-wide memory of tuned algorithms, keyed by a GEMM signature string.
std::optional<cublasLtMatmulAlgo_t> tuned_algo(const std::string& key);
void remember_tuned_algo(const std::string& key, const cublasLtMatmulAlgo_t& algo);

// One line describing an algorithm's configuration (id, tile, stages, split-K, cluster) for logs.
std::string describe_lt_algo(const cublasLtMatmulAlgo_t& algo);

// Whether QLM_LT_AUTOTUNE_LOG asks for the candidates' times on stderr.
bool lt_autotune_log();

}  // namespace qlm::cuda
