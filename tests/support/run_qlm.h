// Runs the built `qlm` binary (the CLI tests): a shell fragment of arguments in, exit status,
// stdout and stderr out.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace qlm::testing {

struct QlmRun {
  int status = -1;  // exit status; -1 when it did not exit normally
  std::string out, err;
};

// Path of the qlm binary of this build.
std::filesystem::path qlm_binary();
// Runs a /bin/sh command line: its exit status, stdout, and stderr (through a file in `scratch`).
QlmRun run_command(const std::string& command, const TempDir& scratch);
// `args` is pasted after the binary into a /bin/sh command line (quote paths yourself); stderr
// goes through a file in `scratch`.
QlmRun run_qlm(const std::string& args, const TempDir& scratch);
QlmRun run_qlm(const std::string& args);

// The JSON objects of a `--json` run that prints one per line (bench-moe, bench-attention); empty lines skipped.
std::vector<nlohmann::json> json_lines(const std::string& out);

}  // namespace qlm::testing
