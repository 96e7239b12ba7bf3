#!/usr/bin/env bash
# Everything the tests need, from nothing: system packages (as root), the Python environment,
# the local Slurm of namespaced nodes (minicluster up: 2 nodes, each its own network namespace); then the whole
# suite; then the cluster is stopped again, leaving no namespace, link or cgroup behind.
set -euo pipefail
cd "$(dirname "$0")/.."
APT_PACKAGES="slurm-wlm munge iproute2 openmpi-bin libopenmpi-dev lmod cmake g++ python3-dev shellcheck texlive-latex-base"
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
