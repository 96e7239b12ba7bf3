#!/bin/bash
# Opt-in, by hand: Horovod 0.28.1 with oneCCL CPU operations (backend = "oneccl"), from PyPI alone.
# Not part of test.sh: it downloads ~210 MB and builds Horovod again (15-25 minutes on two cores).
#
#   bash scripts/horovod-oneccl.sh [DEST]      # default DEST: ~/.cache/hpcbench/oneccl
#
# What it works around (each found the hard way, oneCCL 2021.17.2 / 2022.2.0 wheels):
# - oneccl-cpu's libccl.so.1 NEEDs libccl.so.2, which only the full `oneccl` wheel ships (157 MB,
#   with SYCL/GPU parts): we take that one small library out of it.
# - oneCCL's default transport (CCL_ATL_TRANSPORT=mpi) needs Intel MPI's libmpi.so.12; the OFI
#   transport works with Debian's libfabric (tcp provider), found under $CCL_ROOT/lib/libfabric.
# - Horovod's CMake reads CCL_ROOT/include and CCL_ROOT/lib/libccl.so; torch 2.x needs C++17+.
# DDP over oneCCL is not possible from PyPI: oneccl_bindings_for_pytorch (oneccl_bind_pt) is only
# published on Intel's own package index.
set -euo pipefail
PY=${PY:-.venv/bin/python}
DEST=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/hpcbench/oneccl}
CCL_VERSION=${CCL_VERSION:-2021.17.2}
HOROVOD_VERSION=0.28.1
work=$(mktemp -d "${TMPDIR:-/tmp}/hpcbench-oneccl.XXXXXX")
root="$DEST/ccl"

echo "== oneCCL $CCL_VERSION into $root"
"$PY" -m pip download -q --no-deps -d "$work/whl" "oneccl-cpu==$CCL_VERSION" "oneccl-cpu-devel==$CCL_VERSION" \
    "oneccl==$CCL_VERSION" 2>&1 | grep -v "^WARNING: Location" || true
mkdir -p "$root/lib/libfabric"
unzip -q -o "$work"/whl/oneccl_cpu_devel-*.whl '*.data/data/include/*' -d "$work/devel"
cp -a "$work"/devel/*.data/data/include "$root/"
unzip -q -o "$work"/whl/oneccl_cpu-*.whl '*.data/data/lib/*' -d "$work/cpu"
cp -a "$work"/cpu/*.data/data/lib/. "$root/lib/"
unzip -q -o "$work"/whl/oneccl-"$CCL_VERSION"-*.whl '*.data/data/lib/libccl.so.2*' -d "$work/full"
cp -a "$work"/full/*.data/data/lib/. "$root/lib/"
fabric=$(ldconfig -p | awk '/libfabric\.so\.1 /{print $NF; exit}')
[ -n "$fabric" ] || { echo "error: no libfabric.so.1 (apt-get install libfabric1)" >&2; exit 2; }
ln -sf "$fabric" "$root/lib/libfabric/libfabric.so"
ln -sf "$fabric" "$root/lib/libfabric/libfabric.so.1"

echo "== building horovod $HOROVOD_VERSION with MPI, Gloo and oneCCL operations"
"$PY" -m pip download -q --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$work" 2>&1 \
    | grep -v "^WARNING: Location" || true
tar -xzf "$work/horovod-$HOROVOD_VERSION.tar.gz" -C "$work"
src="$work/horovod-$HOROVOD_VERSION"
sed -i 's/CMAKE_CXX_STANDARD 14/CMAKE_CXX_STANDARD 20/' "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
cuda=()
if [ -x /usr/local/cuda/bin/nvcc ]; then  # a CUDA toolkit makes Horovod's CMake build CUDA parts: point it there
    # shellcheck disable=SC2054  # 80,90 is one value: the list of compute capabilities
    cuda=(CUDA_HOME=/usr/local/cuda CUDAToolkit_ROOT=/usr/local/cuda HOROVOD_BUILD_CUDA_CC_LIST=80,90
          PATH="/usr/local/cuda/bin:$PATH")
fi
(cd "$src" && env "${cuda[@]}" CCL_ROOT="$root" HOROVOD_CPU_OPERATIONS=CCL HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 \
    HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$(nproc)" \
    "$PY" -m pip wheel -q --no-build-isolation --no-deps . -w "$DEST/wheel" >"$work/build.log" 2>&1) \
    || { tail -30 "$work/build.log" >&2; echo "error: horovod build failed (log: $work/build.log)" >&2; exit 2; }
whl=$(ls "$DEST"/wheel/horovod-"$HOROVOD_VERSION"-*.whl)
rm -rf "$work"  # the downloads and the build tree; kept above when the build fails, for its log
cat <<EOF
== done. Install (replaces this venv's Horovod with a superset: MPI, Gloo and oneCCL operations):
    $PY -m pip install --no-deps --force-reinstall $whl
Then give the ranks oneCCL's runtime, e.g. in the sweep file:
    [slurm.env]
    LD_LIBRARY_PATH = "$root/lib"   # libccl.so.2, which libccl.so.1 needs (prepend your own if any)
    CCL_ROOT = "$root"              # oneCCL looks for libfabric under \$CCL_ROOT/lib/libfabric
    CCL_ATL_TRANSPORT = "ofi"       # the default (mpi) needs Intel MPI
    FI_PROVIDER = "tcp"
and check with: hpcbench env   (horovod tensor ops: mpi, gloo, ccl)
EOF
