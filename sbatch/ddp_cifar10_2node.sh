#!/bin/bash
# ddp_cifar10_2node.sh: PyTorch DDP training of ResNet-18 on CIFAR-10 over 2 nodes, the set-up of
# the vendors' multi-node DDP guides: one torchrun per node (srun --ntasks-per-node=1), which
# starts one rank per GPU and meets the other node through a c10d rendezvous on the first node;
# NCCL over InfiniBand between the nodes.
#
# Measures: per-step time and throughput (images/s, mean and 95% CI, warm-up excluded), the
# communication/compute split, and, through NCCL_DEBUG=INFO, which transport NCCL really took
# (NET/IB between nodes is what you want; NET/Socket means IB was not used).
#
# Edit for your site: the #SBATCH lines (partition, account, GPUs per node), and
#   GPUS_PER_NODE    ranks per node (default: SLURM_GPUS_ON_NODE, else 8)
#   DATA_DIR         folder with CIFAR-10 (cifar-10-batches-py); hpcbench data fetch cifar10 --dest DIR
#   DATA             cifar10 (default) or synthetic
#   NCCL_IB_HCA, NCCL_SOCKET_IFNAME   your HCAs (ibv_devinfo -l) and the bootstrap interface (ip -br link)
#   BATCH_SIZE, STEPS, WARMUP_STEPS, RDZV_PORT, MODEL
#   MODULE_USE, MODULES, CPU_BIND, PYTHON   see sbatch/lib.sh
# CPU only: HPCBENCH_DEVICE=cpu DATA=synthetic GPUS_PER_NODE=1 STEPS=3 sbatch --gpus-per-node=0 sbatch/ddp_cifar10_2node.sh
# Output:   runs/ddp_cifar10_2node-<jobid>/ (log and result.json); then: hpcbench summarize runs/ddp_cifar10_2node-<jobid>
#
#SBATCH --job-name=ddp_cifar10_2node
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=32
#SBATCH --time=00:30:00
#SBATCH --output=ddp_cifar10_2node-%j.out
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

GPUS_PER_NODE=${GPUS_PER_NODE:-${SLURM_GPUS_ON_NODE:-8}}
MODEL=${MODEL:-cifar_resnet18}
DATA=${DATA:-cifar10}
DATA_DIR=${DATA_DIR:-}
BATCH_SIZE=${BATCH_SIZE:-128}
STEPS=${STEPS:-100}
WARMUP_STEPS=${WARMUP_STEPS:-10}
# Below the ephemeral port range (32768+), the rule of hpcbench.workloads.distenv.job_port.
RDZV_PORT=${RDZV_PORT:-$((20000 + ${SLURM_JOB_ID:-0} % 6000))}
# The IB settings of the guides; export your own values before sbatch to override them.
export NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-0}
if [ -n "${NCCL_IB_HCA:-}" ]; then export NCCL_IB_HCA; fi
if [ -n "${NCCL_SOCKET_IFNAME:-}" ]; then export NCCL_SOCKET_IFNAME; fi

hpcb_start ddp_cifar10_2node
hpcb_modules
hpcb_device
BACKEND=nccl
[ "$HPCBENCH_DEVICE" = cuda ] || BACKEND=gloo
NODES=${SLURM_JOB_NUM_NODES:-1}
# The first node's address as the ranks find it: DNS, else Slurm's NodeAddr (node names need not resolve).
MASTER_ADDR=$("$PYTHON" -c 'from hpcbench.workloads.distenv import from_environ; print(from_environ().master_addr)') \
    || hpcb_die "cannot find the first node's address (is hpcbench importable by $PYTHON?)"
echo "# rendezvous: $MASTER_ADDR:$RDZV_PORT, $NODES nodes x $GPUS_PER_NODE ranks, backend $BACKEND"
DATA_ARGS=()
if [ -n "$DATA_DIR" ]; then DATA_ARGS=(--data-dir "$DATA_DIR"); fi

# torchrun starts the ranks and must not be bound to one socket itself; the ranks are placed by it.
hpcb_run srun --ntasks="$NODES" --ntasks-per-node=1 --cpu-bind=none \
    "$PYTHON" -m torch.distributed.run --nnodes="$NODES" --nproc-per-node="$GPUS_PER_NODE" \
    --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$RDZV_PORT" --rdzv-id="${SLURM_JOB_ID:-0}" --no-python \
    "$PYTHON" -u -m hpcbench.workloads.train \
    --out "$RUN_DIR" --point-id "job${SLURM_JOB_ID:-0}" --label "ddp-$BACKEND-$MODEL-n${NODES}x${GPUS_PER_NODE}" \
    --framework ddp --backend "$BACKEND" --device "$HPCBENCH_DEVICE" --model "$MODEL" \
    --data "$DATA" "${DATA_ARGS[@]}" --batch-size "$BATCH_SIZE" --steps "$STEPS" --warmup-steps "$WARMUP_STEPS" \
    --lr 0.1 --nodes "$NODES" --ranks-per-node "$GPUS_PER_NODE"
