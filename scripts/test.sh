#!/usr/bin/env bash
# Everything the tests need, from nothing: system packages (as root), the Python environment,
# the local 2-node Slurm; then the whole suite; then the cluster is stopped again.
set -euo pipefail
cd "$(dirname "$0")/.."
# chromium + chromium-driver: tests/test_web.py opens the report and history pages in a real, headless browser.
APT_PACKAGES="slurm-wlm munge openmpi-bin libopenmpi-dev lmod cmake g++ python3-dev shellcheck texlive-latex-base chromium chromium-driver"
if [ "$(id -u)" = 0 ]; then
    missing=$(for p in $APT_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
    if [ -n "$missing" ]; then
        echo "== apt-get install $missing"
        apt-get update -qq
        # shellcheck disable=SC2086  # one word per package
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    fi
else
    echo "note: not root, so system packages are not installed and the Slurm tests will fail without them" >&2
fi
source scripts/venv.sh
# tests/test_install.py installs hpcbench into fresh venvs offline (--no-index), as a login node would get it:
# the wheels of its core dependencies, at the versions in $VENV, and of the build backend wait in
# $VENV/wheelhouse. Made once per setup.cfg and venv.sh (pip's cache or index serves them; a few seconds).
wheels_want="$stamp_want"
if [ "$(cat "$VENV/wheelhouse/.stamp" 2>/dev/null)" != "$wheels_want" ]; then
    "$VENV/bin/python" -m pip freeze --exclude-editable 2>/dev/null | grep -v '^hpcbench' > "$VENV/constraints.txt"
    mapfile -t core < <("$VENV/bin/python" -c '
from importlib.metadata import requires
print("\n".join(r for r in requires("hpcbench") if "extra ==" not in r))')
    if ! out=$("$VENV/bin/python" -m pip download -q -d "$VENV/wheelhouse" --only-binary=:all: \
            -c "$VENV/constraints.txt" "${core[@]}" setuptools wheel 2>&1); then
        echo "$out" >&2
        echo "error: could not fill $VENV/wheelhouse; see the pip output above" >&2
        exit 2
    fi
    echo "$wheels_want" > "$VENV/wheelhouse/.stamp"
fi
# Horovod (MPI + Gloo) is built from the sdist once and cached outside the clone; see scripts/horovod.sh.
source scripts/horovod.sh
hpcbench_horovod
# Types first: a field misspelt anywhere in hpcbench/ fails the run before any cluster starts (setup.cfg [mypy]).
echo "== mypy hpcbench"
"$VENV/bin/python" -m mypy hpcbench
# OpenMPI refuses root unless told; CI containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$VENV/bin/hpcbench" minicluster up
trap '"$VENV/bin/hpcbench" minicluster down' EXIT
start=$(date +%s)
set +e
"$VENV/bin/python" -m pytest "$@"
rc=$?
set -e
echo "test suite wall time: $(( $(date +%s) - start ))s"
exit $rc
