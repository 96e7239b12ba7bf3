#!/usr/bin/env bash
# Demo on a fresh machine: make an environment (once: about 3 minutes, torch is a 6 GB install), run
# sweeps/local.toml with no scheduler, print the summary table with its 95% intervals.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
exec "$VENV/bin/hpcbench" sweep sweeps/local.toml --backend local "$@"
