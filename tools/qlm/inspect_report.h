// `qlm inspect`: the report, built once as JSON (what --json prints) and rendered as text from
// that same object, so the two outputs cannot drift apart.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>

namespace qlm::cli {

struct InspectOptions {
  std::filesystem::path model_dir;
  bool verify_data = false;  // read every tensor byte (checksums, throughput)
  bool progress = false;     // progress line on stderr while verifying large checkpoints
};

// Never throws for problems with the model: they are collected under "errors" (fatal for loading)
// and "warnings" (odd but loadable).
nlohmann::ordered_json build_inspect_report(const InspectOptions& options);

// Human-readable rendering of build_inspect_report's result.
std::string render_inspect_text(const nlohmann::ordered_json& report);

}  // namespace qlm::cli
