#!/usr/bin/env bash
# shellcheck disable=SC2317  # the step functions below are called through bash -c
# hpcbench on one GPU node, in one go, in under 8 minutes: doctor --gpu, a 1-GPU CUDA sweep through the local
# backend, summarize and explain, every output under $OUT. Written for a lent machine where torch is installed
# and nothing can be downloaded (docs/gpu.md):
#
#   scripts/gpu_check.sh --prepare   # here, with internet: the wheels the GPU node lacks, into .gpu-wheels/
#   scripts/gpu_check.sh --dry-run   # here, on the CPU: every step but the GPU ones, same commands, same outputs
#   scripts/gpu_check.sh             # on the GPU node, with .gpu-wheels/ carried along
#
# PYTHON (default python3) is the interpreter with torch; OUT (default /tmp/gpu-check-out) gets the outputs,
# at most 8 files and none deeper than OUT/a/b (what a lent machine sends back); the run folder travels as a
# tarball. GPU_CHECK_BUDGET (default 450; --dry-run 900, for its tests) caps the seconds of all steps together.
# Exit status: 0 when every step did what it should, else 1 (each step's status is in summary.txt).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
REPO=$(pwd)
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/gpu-check-out}
WHEELS_DIR=.gpu-wheels
# What the GPU image lacks (its package list: /work/.library/device/KINDS.md), pinned: one version of each.
# submitit's own needs (cloudpickle, typing_extensions) are in that image already.
WHEELS="submitit==1.5.4"
MODE=run
case "${1:-}" in
    --prepare) MODE=prepare ;;
    --dry-run) MODE=dry; GPU_CHECK_BUDGET=${GPU_CHECK_BUDGET:-900} ;;
    "") ;;
    -h|--help) sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown option $1 (use --prepare, --dry-run or nothing)" >&2; exit 2 ;;
esac

if [ "$MODE" = prepare ]; then
    mkdir -p "$WHEELS_DIR"
    # shellcheck disable=SC2086  # one word per requirement
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$WHEELS_DIR" $WHEELS || exit 1
    ls -l "$WHEELS_DIR"
    echo "carry $WHEELS_DIR with the call (device tool: carry=[\"$WHEELS_DIR\"]), then run: bash scripts/gpu_check.sh"
    exit 0
fi

mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/gpu-check.XXXXXX)
LOG="$OUT/gpu_check.log"
: > "$LOG"
: > "$OUT/summary.txt"
FAILED=0
T0=$(date +%s)

# The steps share one budget, so that the call ends inside the device tool's limit whatever hangs; what is
# already under $OUT comes back even when a step is cut short.
BUDGET=${GPU_CHECK_BUDGET:-450}
# step NAME EXPECTED_RC TIMEOUT_S CMD...: run CMD with its output in the log, and say how it went in summary.txt
step() {
    local name=$1 want=$2 limit=$3 t rc left
    shift 3
    t=$(date +%s)
    left=$(( T0 + BUDGET - t ))
    if [ "$left" -le 5 ]; then
        echo "$name: skipped, the ${BUDGET}s budget is spent" | tee -a "$OUT/summary.txt"
        FAILED=1
        return 0
    fi
    if [ "$limit" -gt "$left" ]; then limit=$left; fi
    echo "== $name: $*" | tee -a "$LOG"
    timeout "$limit" "$@" >>"$LOG" 2>&1
    rc=$?
    local line
    line=$(printf '%-10s rc=%-3s (want %s) %4ss  %s' "$name" "$rc" "$want" "$(( $(date +%s) - t ))" "$*")
    echo "$line" | tee -a "$OUT/summary.txt"
    if [ "$rc" != "$want" ]; then FAILED=1; fi
    return 0
}

# The carried wheels, installed where only this run sees them (--target: nothing of the image changes).
SITE="$WORK/site"
if ls "$WHEELS_DIR"/*.whl >/dev/null 2>&1; then
    step wheels 0 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$WHEELS_DIR"/*.whl
else
    echo "no wheels in $WHEELS_DIR: run scripts/gpu_check.sh --prepare first (with internet)" | tee -a "$OUT/summary.txt"
    FAILED=1
fi
export PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
HB=("$PY" -m hpcbench)
export PY OUT WORK
# The steps that redirect their own output, as functions (timeout runs them through bash -c).
doctor_gpu() {  # text on stdout and in OUT; the same report as JSON in the kept folder, with the training logs
    "$PY" -m hpcbench doctor --gpu --keep "$WORK/doctor" 2>&1 | tee "$OUT/doctor-gpu.txt"
}
doctor_no_gpu() {  # here: one line on stderr and exit 2, nothing on stdout
    "$PY" -m hpcbench doctor --gpu >"$WORK/stdout" 2>"$OUT/doctor-gpu.txt"
    local rc=$?
    cat "$OUT/doctor-gpu.txt"
    [ ! -s "$WORK/stdout" ] && [ "$(wc -l <"$OUT/doctor-gpu.txt")" = 1 ] || return 99
    return "$rc"
}
explain_run() {
    "$PY" -m hpcbench explain "$1" | tee "$OUT/explain.txt"
}
travel_size() {  # what a device call sends: tracked and untracked-not-ignored files, and the carried wheels
    local bytes
    bytes=$({ git ls-files -z --cached --others --exclude-standard; find .gpu-wheels -type f -print0; } |
        xargs -0 du -cb 2>/dev/null | awk 'END {print $1}')
    echo "$bytes bytes travel with a device call (limit 64 MiB = 67108864)"
    [ "$bytes" -lt 67108864 ]
}
export -f doctor_gpu doctor_no_gpu explain_run travel_size
step imports 0 60 "$PY" -c "import hpcbench, submitit, torch; print('hpcbench', hpcbench.__version__, 'submitit', submitit.__version__, 'from', submitit.__file__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"

if [ "$MODE" = run ]; then
    { nvidia-smi; nvidia-smi topo -m; } > "$OUT/nvidia-smi.txt" 2>&1
    # Text on stdout, the same report as JSON in the kept folder (with the training runs' logs).
    step doctor 0 240 bash -o pipefail -c doctor_gpu
    cp "$WORK/doctor/doctor-gpu.json" "$OUT/" 2>/dev/null
    SWEEP=sweeps/gpu_check.toml
else
    step travel 0 60 bash -c travel_size
    # Here: doctor --gpu must say in one line that there is no GPU, and exit 2.
    step doctor 2 120 bash -c doctor_no_gpu
    # What doctor --gpu says on the fixture trees (sysfs layouts, NVML answers and figures given as data).
    step fixtures 0 300 "$PY" -m pytest -q -s -p no:cacheprovider tests/test_doctor_gpu.py
    # The same sweep on the CPU: the GPU sweep with only what a CPU run cannot have changed.
    SWEEP="$WORK/gpu_check_cpu.toml"
    sed -e 's/^device = "cuda"/device = "cpu"/' -e 's/^backend = \["nccl"\]/backend = ["gloo"]/' \
        -e 's/^model = "resnet50"/model = "mlp"/' -e 's/^gpus_per_node = \[1\]/ranks_per_node = [1]/' \
        -e 's/^cpus_per_task = 4/cpus_per_task = 1/' -e 's/^name = "gpu-check"/name = "gpu-check-cpu"/' \
        sweeps/gpu_check.toml > "$SWEEP"
fi

RUN="$WORK/run"
step sweep 0 180 "${HB[@]}" sweep "$SWEEP" --backend local --run-dir "$RUN"
step summarize 0 120 "${HB[@]}" summarize "$RUN" --out "$WORK/report"
cp "$WORK/report/report.md" "$OUT/" 2>/dev/null
# shellcheck disable=SC2016  # $0 is expanded by the inner bash: the run folder
step explain 0 120 bash -o pipefail -c 'explain_run "$0"' "$RUN"
KEPT=(run report)
if [ -d "$WORK/doctor" ]; then KEPT+=(doctor); fi
tar -czf "$OUT/run.tar.gz" -C "$WORK" "${KEPT[@]}" 2>>"$LOG"

echo "total $(( $(date +%s) - T0 ))s; outputs in $OUT: $(cd "$OUT" && echo *)" | tee -a "$OUT/summary.txt"
rm -rf "$WORK"
exit "$FAILED"
