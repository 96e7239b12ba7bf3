# shellcheck shell=bash
# Sourced by demo.sh and test.sh: create .venv with hpcbench and its dependencies, once.
# torch/torchvision are pinned to the releases this project is tested with (a CUDA build; it runs on CPU too).
HPCBENCH_PY=${HPCBENCH_PY:-python3}
# Absolute, because later steps (scripts/horovod.sh) run the venv's python from other folders.
VENV=$(realpath -m "${HPCBENCH_VENV:-.venv}")
TORCH_PINS="torch==2.14.1 torchvision==0.29.1"
stamp_want="$(cat setup.cfg scripts/venv.sh | sha256sum | cut -c1-16)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.hpcbench-stamp" 2>/dev/null)" != "$stamp_want" ]; then
    echo "== creating $VENV, once: torch and its CUDA libraries are a 6 GB install, so this first run takes about"
    echo "   3 minutes on an idle 2-core machine (longer on a busy one); later runs reuse $VENV and start at once"
    "$HPCBENCH_PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
    # pip's output is shown when it fails: on success it is only the build backend's notes (an editable
    # install's "Editable installation." advice), which say nothing to a user of the demo.
    # shellcheck disable=SC2086  # one word per pin
    if ! out=$("$VENV/bin/python" -m pip install -q $TORCH_PINS -e ".[test]" 2>&1); then
        echo "$out" | grep -v "^WARNING: Location" >&2
    fi
    "$VENV/bin/python" -c "import torch, torchvision, hpcbench" \
        || { echo "error: $VENV is incomplete; see the pip output above" >&2; exit 2; }
    echo "$stamp_want" > "$VENV/.hpcbench-stamp"
fi
# The parser's C scanner (setup.py) is built in place by the editable install: again when its source changes.
scan_want="$(cat setup.py hpcbench/parse/_scan.c | sha256sum | cut -c1-16)"
if [ "$(cat "$VENV/.hpcbench-scan-stamp" 2>/dev/null)" != "$scan_want" ]; then
    if ! out=$("$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e . 2>&1); then
        echo "$out" >&2
        echo "error: could not install hpcbench into $VENV; see the pip output above" >&2
        exit 2
    fi
    echo "$scan_want" > "$VENV/.hpcbench-scan-stamp"
fi
