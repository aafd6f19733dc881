// The `qlm` command line. Each subcommand lives in its own file and registers itself here.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "quant/quantization_config.h"
#include "tools/qlm/commands.h"

namespace {

// Quantization plugins must be registered before any subcommand resolves a format, so
// `--quant-plugin PATH` (any position, repeatable) is honoured before the command line is parsed.
std::vector<std::string> plugin_paths(int argc, char** argv) {
  std::vector<std::string> paths;
  const std::string flag = "--quant-plugin";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == flag && i + 1 < argc) paths.push_back(argv[++i]);
    else if (arg.rfind(flag + "=", 0) == 0) paths.push_back(arg.substr(flag.size() + 1));
  }
  return paths;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qlm: load and run quantized Hugging Face checkpoints natively"};
  app.require_subcommand(1);
  app.fallthrough();
  std::vector<std::string> plugins;
  app.add_option("--quant-plugin", plugins,
                 "Shared library registering extra quantization formats (repeatable; also QLM_QUANT_PLUGINS)");
  qlm::cli::register_all_commands(app);
  try {
    qlm::load_plugins_from_env();
    for (const auto& path : plugin_paths(argc, argv)) qlm::load_quant_plugin(path);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const qlm::Error& e) {
    std::fprintf(stderr, "qlm: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
