// `qlm inspect MODEL --plan`: the load plan (runtime/model_plan.h) as JSON, and as text rendered
// from that same JSON so the two outputs cannot drift apart.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "runtime/model_plan.h"

namespace qlm::cli {

// {"model_dir", "architecture", "device", "capability", "act_dtype", "tp", "linear_backend",
//  "quantization", "ranks": [{"rank", "layers": [{"layer", "format", "method", "kernel", "K_p", "N_p",
//  "rejected": [{"kernel", "reason"}]}], "summary": [{"method", "kernel", "count"}]}], "notes": [...],
//  "totals": {"layers", "quantized", "unquantized"}}
nlohmann::ordered_json plan_json(const std::string& model_dir, const runtime::ModelPlan& plan);

// Rank 0 in full; every other rank only where it differs from rank 0.
std::string render_plan_text(const nlohmann::ordered_json& plan);

}  // namespace qlm::cli
