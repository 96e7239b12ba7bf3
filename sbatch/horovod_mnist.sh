#!/bin/bash
# horovod_mnist.sh: Horovod data-parallel training of the MNIST CNN (the network of Horovod's
# pytorch_mnist example), one rank per GPU, over one backend.
#
# Measures: per-step time and throughput (images/s, mean and 95% CI over the timed steps, warm-up
# excluded), the communication/compute split, for BACKEND = mpi | gloo | nccl, on one node or two.
# The lab's six runs:
#   BACKEND=mpi  sbatch --nodes=1 sbatch/horovod_mnist.sh      BACKEND=mpi  sbatch --nodes=2 sbatch/horovod_mnist.sh
#   BACKEND=gloo sbatch --nodes=1 sbatch/horovod_mnist.sh      BACKEND=gloo sbatch --nodes=2 sbatch/horovod_mnist.sh
#   BACKEND=nccl sbatch --nodes=1 sbatch/horovod_mnist.sh      BACKEND=nccl sbatch --nodes=2 sbatch/horovod_mnist.sh
# (mpi: Horovod's MPI controller, ranks started by srun --mpi=pmix; gloo: its Gloo controller;
#  nccl: GPU allreduce through NCCL. Horovod must be built with them: hpcbench doctor shows the flags.)
#
# Edit for your site: the #SBATCH lines (partition, account, GPUs per node = tasks per node), and
#   BACKEND          mpi | gloo | nccl (default nccl; on the CPU use mpi or gloo)
#   DATA, DATA_DIR   synthetic (default) or mnist with DATA_DIR holding the MNIST files
#                    (fetch them on a login node: hpcbench data fetch mnist --dest DIR)
#   BATCH_SIZE, STEPS, WARMUP_STEPS   per-rank batch and the timed/untimed step counts
#   MODULE_USE, MODULES, SRUN_MPI, CPU_BIND, PYTHON   see sbatch/lib.sh
# CPU only: HPCBENCH_DEVICE=cpu BACKEND=gloo STEPS=5 sbatch --gpus-per-node=0 --ntasks-per-node=2 sbatch/horovod_mnist.sh
# Output:   runs/horovod_mnist-<jobid>/ (log and result.json); then: hpcbench summarize runs/horovod_mnist-<jobid>
#
#SBATCH --job-name=horovod_mnist
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=4
#SBATCH --time=00:20:00
#SBATCH --output=horovod_mnist-%j.out
##SBATCH --partition=gpu
##SBATCH --account=my-project
set -uo pipefail

# lib.sh lies beside this script; sbatch runs a copy from its spool, so ask Slurm where the script was.
src=$(scontrol show job "${SLURM_JOB_ID:-0}" 2>/dev/null | sed -n 's/^ *Command=\([^ ]*\).*/\1/p'); src=${src:-$0}
case $src in /*) ;; *) src="${SLURM_SUBMIT_DIR:-$PWD}/$src" ;; esac
lib=${HPCBENCH_HOME:+$HPCBENCH_HOME/sbatch/lib.sh}; lib=${lib:-$(dirname "$src")/lib.sh}
[ -r "$lib" ] || { echo "error: $lib not found; set HPCBENCH_HOME to the hpcbench checkout" >&2; exit 2; }
# shellcheck source=sbatch/lib.sh
. "$lib"

BACKEND=${BACKEND:-nccl}
DATA=${DATA:-synthetic}
DATA_DIR=${DATA_DIR:-}
BATCH_SIZE=${BATCH_SIZE:-64}
STEPS=${STEPS:-100}
WARMUP_STEPS=${WARMUP_STEPS:-10}

hpcb_start horovod_mnist
hpcb_modules
hpcb_device
# Horovod's MPI controller needs srun to wire up MPI for its ranks.
if [ "$BACKEND" = mpi ] && [ -z "$SRUN_MPI" ]; then SRUN_MPI=pmix; fi
mapfile -t SRUN_OPTS < <(hpcb_srun_opts)
NODES=${SLURM_JOB_NUM_NODES:-1}
PER_NODE=${SLURM_NTASKS_PER_NODE:-1}
DATA_ARGS=()
if [ -n "$DATA_DIR" ]; then DATA_ARGS=(--data-dir "$DATA_DIR"); fi

hpcb_run srun "${SRUN_OPTS[@]}" "$PYTHON" -u -m hpcbench.workloads.train \
    --out "$RUN_DIR" --point-id "job${SLURM_JOB_ID:-0}" --label "horovod-$BACKEND-mnist_cnn-n${NODES}x${PER_NODE}" \
    --framework horovod --backend "$BACKEND" --device "$HPCBENCH_DEVICE" --model mnist_cnn \
    --data "$DATA" "${DATA_ARGS[@]}" --batch-size "$BATCH_SIZE" --steps "$STEPS" --warmup-steps "$WARMUP_STEPS" \
    --lr 0.01 --nodes "$NODES" --ranks-per-node "$PER_NODE"
