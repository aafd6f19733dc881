#!/usr/bin/env bash
# The main job on the embedded default model: set up, build, and inspect models/tiny-gptq.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
build/release/qlm inspect models/tiny-gptq
