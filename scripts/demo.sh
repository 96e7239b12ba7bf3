#!/usr/bin/env bash
# Demo on a fresh machine: make an environment, run sweeps/local.toml with no scheduler, print the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
exec "$VENV/bin/hpcbench" sweep sweeps/local.toml --backend local "$@"
