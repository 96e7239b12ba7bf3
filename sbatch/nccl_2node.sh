#!/bin/bash
# nccl_2node.sh: allreduce bus bandwidth between 2 nodes, one rank per GPU.
#
# Measures: nccl-tests `all_reduce_perf -b 8 -e 1G -f 2 -g 1` (8 B to 1 GiB, x2 steps), algbw and
# busbw per size, with NCCL_DEBUG=INFO so the log also shows which transport NCCL took (NET/IB
# between the nodes, P2P/NVLink inside them). When all_reduce_perf is not installed, or there is no
# GPU, it runs hpcbench's own allreduce benchmark instead (same table layout; NCCL on GPUs, Gloo on
# the CPU) and says so in the log.
#
# Edit for your site: the #SBATCH lines (partition, account, GPUs per node = tasks per node), and
#   NCCL_TESTS_DIR   folder holding all_reduce_perf (or have it on PATH, e.g. from a module)
#   MODULE_USE, MODULES   e.g. MODULES="cuda/12.4 nccl/2.21 openmpi/4.1 hpcbench"
#   SRUN_MPI         srun --mpi plugin all_reduce_perf was built for (pmix, pmi2; see srun --mpi=list)
#   NCCL_IB_HCA, NCCL_SOCKET_IFNAME   as for any NCCL job on your network
#   MIN_BYTES, MAX_BYTES, STEP_FACTOR   the size sweep (default 8, 1G, 2)
# Run:      sbatch sbatch/nccl_2node.sh
# CPU only: HPCBENCH_DEVICE=cpu MAX_BYTES=1M sbatch --gpus-per-node=0 --ntasks-per-node=1 sbatch/nccl_2node.sh
# Output:   runs/nccl_2node-<jobid>/nccl_2node.log; then: hpcbench summarize runs/nccl_2node-<jobid>
#
#SBATCH --job-name=nccl_2node
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=1
#SBATCH --time=00:15:00
#SBATCH --output=nccl_2node-%j.out
##SBATCH --partition=gpu
##SBATCH --account=my-project
##SBATCH --exclusive
set -uo pipefail

# lib.sh lies beside this script; sbatch runs a copy from its spool, so ask Slurm where the script was.
src=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p'); src=${src:-$0}
case $src in /*) ;; *) src="${SLURM_SUBMIT_DIR:-$PWD}/$src" ;; esac
lib=${HPCBENCH_HOME:+$HPCBENCH_HOME/sbatch/lib.sh}; lib=${lib:-$(dirname "$src")/lib.sh}
[ -r "$lib" ] || { echo "error: $lib not found; set HPCBENCH_HOME to the hpcbench checkout" >&2; exit 2; }
# shellcheck source=sbatch/lib.sh
. "$lib"

NCCL_TESTS_DIR=${NCCL_TESTS_DIR:-}
MIN_BYTES=${MIN_BYTES:-8}
MAX_BYTES=${MAX_BYTES:-1G}
STEP_FACTOR=${STEP_FACTOR:-2}
ITERS=${ITERS:-20}
WARMUP_ITERS=${WARMUP_ITERS:-5}

hpcb_start nccl_2node
hpcb_modules
hpcb_device
mapfile -t SRUN_OPTS < <(hpcb_srun_opts)

BIN=""
if [ -n "$NCCL_TESTS_DIR" ] && [ -x "$NCCL_TESTS_DIR/all_reduce_perf" ]; then
    BIN="$NCCL_TESTS_DIR/all_reduce_perf"
elif command -v all_reduce_perf >/dev/null 2>&1; then
    BIN=$(command -v all_reduce_perf)
fi

if [ -n "$BIN" ] && [ "$HPCBENCH_DEVICE" = cuda ]; then
    echo "# nccl-tests: $BIN"
    hpcb_run srun "${SRUN_OPTS[@]}" "$BIN" -b "$MIN_BYTES" -e "$MAX_BYTES" -f "$STEP_FACTOR" -g 1 \
        -n "$ITERS" -w "$WARMUP_ITERS"
else
    if [ -z "$BIN" ]; then
        why="all_reduce_perf not found (NCCL_TESTS_DIR='$NCCL_TESTS_DIR', not on PATH)"
    else
        why="no GPU on this node (HPCBENCH_DEVICE=$HPCBENCH_DEVICE)"
    fi
    BACKEND=nccl
    [ "$HPCBENCH_DEVICE" = cuda ] || BACKEND=gloo
    echo "# FALLBACK: $why; running hpcbench's allreduce benchmark instead (backend $BACKEND, device $HPCBENCH_DEVICE)"
    NODES=${SLURM_JOB_NUM_NODES:-1}
    PER_NODE=${SLURM_NTASKS_PER_NODE:-1}
    hpcb_run srun "${SRUN_OPTS[@]}" "$PYTHON" -u -m hpcbench.workloads.collective \
        --out "$RUN_DIR" --point-id "job${SLURM_JOB_ID:-0}" --label "ddp-$BACKEND-allreduce-n${NODES}x${PER_NODE}" \
        --framework ddp --backend "$BACKEND" --device "$HPCBENCH_DEVICE" --nodes "$NODES" --ranks-per-node "$PER_NODE" \
        --min-bytes "$(hpcb_bytes "$MIN_BYTES")" --max-bytes "$(hpcb_bytes "$MAX_BYTES")" --step-factor "$STEP_FACTOR" \
        --iters "$ITERS" --warmup-iters "$WARMUP_ITERS"
fi
