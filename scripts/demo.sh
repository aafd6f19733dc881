#!/usr/bin/env bash
# The main job on the embedded default model: set up, build, and generate text with models/default
# (a ~5.8M-parameter Llama trained on the Debian fortunes, int4 compressed-tensors; docs/default-model.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
build/release/qlm generate models/default --prompt "The secret of a happy life is" --max-tokens 80
