#include "support/run_qlm.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace qlm::testing {

std::filesystem::path qlm_binary() { return std::filesystem::path(QLM_BINARY_DIR) / "qlm"; }

QlmRun run_command(const std::string& command, const TempDir& scratch) {
  const std::filesystem::path err_file = scratch / "stderr.txt";
  QlmRun result;
  FILE* pipe = ::popen((command + " 2>'" + err_file.string() + "'").c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), n);
  const int raw = ::pclose(pipe);
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  result.err = ss.str();
  return result;
}

QlmRun run_qlm(const std::string& args, const TempDir& scratch) {
  return run_command("'" + qlm_binary().string() + "' " + args, scratch);
}

QlmRun run_qlm(const std::string& args) {
  TempDir scratch;
  return run_qlm(args, scratch);
}

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::istringstream lines(out);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

}  // namespace qlm::testing
