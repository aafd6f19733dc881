// The `qlm` command line. Each subcommand lives in its own file and registers itself here.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "core/error.h"
#include "tools/qlm/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"qlm: load and run quantized Hugging Face checkpoints natively"};
  app.require_subcommand(1);
  qlm::cli::register_all_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const qlm::Error& e) {
    std::fprintf(stderr, "qlm: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
