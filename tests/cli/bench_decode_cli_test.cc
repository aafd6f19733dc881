// `qlm bench-decode synthetic:...` interrupted while it writes its synthetic checkpoint (several GB
// for real shapes) removes the checkpoint and ends by the signal, on the CPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/run_qlm.h"
#include "support/temp_dir.h"

namespace qlm {
namespace {

namespace fs = std::filesystem;

TEST(BenchDecodeCli, InterruptedSyntheticCheckpointIsRemoved) {
  testing::TempDir dir;
  const fs::path tmp = dir / "tmp";
  fs::create_directories(tmp);
  const std::string q = [](const fs::path& p) { return "'" + p.string() + "'"; }(tmp);
  // The 8B shape with 4 layers is ~2 GB to write: long enough to be caught while writing.
  const std::string script = "'" + testing::qlm_binary().string() +
                             "' bench-decode synthetic:llama3-8b:layers=4 --device cpu --tokens 2 --tmp " + q +
                             " >/dev/null 2>/dev/null & p=$!; i=0; while [ $i -lt 1000 ] && ! ls " + q +
                             " | grep -q '^qlm-synthetic-'; do sleep 0.01; i=$((i+1)); done; sleep 0.2; "
                             "kill -TERM $p; wait $p; exit $?";
  std::ofstream(dir / "interrupt.sh") << script << "\n";
  const int status = std::system(("sh '" + (dir / "interrupt.sh").string() + "'").c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << "bench-decode should end by SIGTERM";
  for (const auto& e : fs::directory_iterator(tmp)) ADD_FAILURE() << "left over: " << e.path();
}

}  // namespace
}  // namespace qlm
