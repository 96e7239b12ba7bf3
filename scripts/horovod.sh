# shellcheck shell=bash disable=SC2012  # ls | head picks one wheel file by a fixed name pattern
# Sourced by test.sh after venv.sh (needs $VENV): make `import horovod.torch` work in $VENV.
#
# PyPI has no Horovod wheels, and the 0.28.1 sdist does not build against torch 2.x as shipped:
# torch's headers need C++17+, while Horovod's CMakeLists pin C++14. So: download the sdist, raise
# CMAKE_CXX_STANDARD to 20, build a wheel once, keep it in a cache outside the clone (a fresh
# clone or a rebuilt .venv then installs in seconds), install it.
#
# Controllers: MPI (needs libopenmpi-dev) and Gloo (vendored). Tensor operations: MPI and Gloo on
# the CPU; with nvcc present the build is CUDA-aware, and NCCL operations are tried first, with
# the NCCL that torch's wheel ships (nvidia-nccl), falling back to a build without them.
#
# Knobs: HOROVOD_WHEEL_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/hpcbench/wheels),
#        HOROVOD_TRY_NCCL=0 to skip the NCCL attempt.
HOROVOD_VERSION=0.28.1
HOROVOD_WHEEL_CACHE=${HOROVOD_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hpcbench/wheels}
HOROVOD_RUNTIME_DEPS="cloudpickle psutil pyyaml packaging"

hpcbench_horovod_build() {
    local work sdist src nccl nccl_shim cc_env=()
    work=$(mktemp -d "${TMPDIR:-/tmp}/hpcbench-horovod.XXXXXX")
    "$VENV/bin/python" -m pip download -q --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$work" \
        || { echo "error: cannot download the horovod==$HOROVOD_VERSION sdist from PyPI" >&2; return 2; }
    sdist=$(ls "$work"/horovod-"$HOROVOD_VERSION".tar.gz)
    # --no-build-isolation builds with the venv's own setuptools; before 70.1 it has no bdist_wheel.
    "$VENV/bin/python" -m pip install -q wheel 2>&1 | grep -v "^WARNING: Location" || true
    src=$(_hpcbench_horovod_src "$sdist" "$work/try1") || return 2
    if [ -x /usr/local/cuda/bin/nvcc ]; then
        # shellcheck disable=SC2054  # 80,90 is one value: the list of compute capabilities
        cc_env=(CUDA_HOME=/usr/local/cuda CUDAToolkit_ROOT=/usr/local/cuda HOROVOD_BUILD_CUDA_CC_LIST=80,90
                PATH="/usr/local/cuda/bin:$PATH")
    fi
    local base=(HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1
                HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$(nproc)")
    nccl=$("$VENV/bin/python" -c 'import importlib.util as u; s = u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0] if s else "")' 2>/dev/null || true)
    if [ "${#cc_env[@]}" -gt 0 ] && [ "${HOROVOD_TRY_NCCL:-1}" = 1 ] && [ -f "$nccl/include/nccl.h" ]; then
        # torch's nvidia-nccl wheel has only libnccl.so.2; CMake's FindNCCL looks for libnccl.so.
        nccl_shim="$work/nccl"
        mkdir -p "$nccl_shim/lib"
        ln -s "$nccl/include" "$nccl_shim/include"
        ln -s "$nccl/lib/libnccl.so.2" "$nccl_shim/lib/libnccl.so"
        echo "== building horovod $HOROVOD_VERSION with NCCL GPU operations (a few minutes)"
        if (cd "$src" && env "${base[@]}" "${cc_env[@]}" HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_HOME="$nccl_shim" \
                HOROVOD_NCCL_LINK=SHARED "$VENV/bin/python" -m pip wheel -q --no-build-isolation --no-deps . -w "$work/dist" \
                >"$work/build-nccl.log" 2>&1); then
            _hpcbench_horovod_keep "$work" && return 0
        fi
        echo "note: the NCCL build failed (log: $work/build-nccl.log); building without NCCL operations" >&2
        # A fresh tree: pip builds in place, and CMake's cache would keep the NCCL settings.
        src=$(_hpcbench_horovod_src "$sdist" "$work/try2") || return 2
    fi
    echo "== building horovod $HOROVOD_VERSION with MPI and Gloo (a few minutes)"
    (cd "$src" && env "${base[@]}" "${cc_env[@]}" "$VENV/bin/python" -m pip wheel -q --no-build-isolation --no-deps . \
        -w "$work/dist" >"$work/build.log" 2>&1) \
        || { tail -40 "$work/build.log" >&2; echo "error: horovod build failed (log: $work/build.log)" >&2; return 2; }
    _hpcbench_horovod_keep "$work"
}

_hpcbench_horovod_src() {  # extract the sdist into $2 and patch it; prints the source folder
    mkdir -p "$2"
    tar -xzf "$1" -C "$2"
    local src="$2/horovod-$HOROVOD_VERSION"
    sed -i 's/CMAKE_CXX_STANDARD 14/CMAKE_CXX_STANDARD 20/' "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
    grep -q 'CMAKE_CXX_STANDARD 20' "$src/horovod/torch/CMakeLists.txt" \
        || { echo "error: horovod sdist layout changed: CMAKE_CXX_STANDARD not found to patch" >&2; return 2; }
    echo "$src"
}

_hpcbench_horovod_keep() {
    mkdir -p "$HOROVOD_WHEEL_CACHE"
    # Copy then rename, so a concurrent reader never sees half a wheel.
    local whl
    whl=$(ls "$1"/dist/horovod-"$HOROVOD_VERSION"-*.whl) || return 1
    cp "$whl" "$HOROVOD_WHEEL_CACHE/.$(basename "$whl").tmp"
    mv "$HOROVOD_WHEEL_CACHE/.$(basename "$whl").tmp" "$HOROVOD_WHEEL_CACHE/$(basename "$whl")"
}

hpcbench_horovod() {
    "$VENV/bin/python" -c "import horovod.torch" 2>/dev/null && return 0
    local tag whl
    tag=$("$VENV/bin/python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
    whl=$(ls "$HOROVOD_WHEEL_CACHE"/horovod-"$HOROVOD_VERSION"-"$tag"-*.whl 2>/dev/null | head -1 || true)
    if [ -z "$whl" ]; then
        hpcbench_horovod_build || return $?
        whl=$(ls "$HOROVOD_WHEEL_CACHE"/horovod-"$HOROVOD_VERSION"-"$tag"-*.whl | head -1)
    fi
    echo "== installing $whl"
    # shellcheck disable=SC2086  # one word per package
    "$VENV/bin/python" -m pip install -q --no-deps "$whl" $HOROVOD_RUNTIME_DEPS 2>&1 | grep -v "^WARNING: Location" || true
    "$VENV/bin/python" -c "import horovod, horovod.torch as h; print('horovod', horovod.__version__, 'mpi', h.mpi_built(), 'gloo', h.gloo_built(), 'nccl', h.nccl_built())" \
        || { echo "error: horovod installed from $whl but does not import (stale cached wheel? delete it)" >&2; return 2; }
}
