#!/bin/bash
# hpcbench job script: point nccl-resnet50-b64-n2x4 (64a670f481) of sweep scaling.
# Rendered by hpcbench 0.1.0. Submit it by hand with: sbatch /scratch/runs/scaling-golden/points/nccl-resnet50-b64-n2x4-64a670f481/job.sh
#SBATCH --job-name=hpcb-scaling-nccl-resnet50-b64-n2x4
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=8
# A node failure must end the job as NODE_FAIL with its logs, not rerun it from scratch over them.
#SBATCH --no-requeue
#SBATCH --time=00:20:00
#SBATCH --partition=gpu
#SBATCH --output=/scratch/runs/scaling-golden/points/nccl-resnet50-b64-n2x4-64a670f481/job-%j.out
#SBATCH --error=/scratch/runs/scaling-golden/points/nccl-resnet50-b64-n2x4-64a670f481/job-%j.err
#SBATCH --exclusive

set -uo pipefail

if ! type module >/dev/null 2>&1; then
    for f in /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash /etc/profile.d/modules.sh; do
        if [ -r "$f" ]; then set +u; . "$f"; set -u; break; fi
    done
fi
set -e  # a module that does not load must stop the job before it runs in the wrong environment
module load cuda/12.4
module load nccl/2.21
set +e

export NCCL_DEBUG=INFO
export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"
export NCCL_IB_DISABLE=0

cd /scratch/runs/scaling-golden/points/nccl-resnet50-b64-n2x4-64a670f481
srun --ntasks=8 --ntasks-per-node=4 --cpu-bind=sockets --gpus-per-task=1 --gpu-bind=single:1 \
    /opt/hpcbench/bin/python -u -m hpcbench.workloads.train \
    --out /scratch/runs/scaling-golden/points/nccl-resnet50-b64-n2x4-64a670f481 \
    --point-id 64a670f481 \
    --label nccl-resnet50-b64-n2x4 \
    --framework ddp \
    --backend nccl \
    --model resnet50 \
    --batch-size 64 \
    --nodes 2 \
    --ranks-per-node 4 \
    --device cuda \
    --data synthetic \
    --steps 50 \
    --warmup-steps 10 \
    --lr 0.01
rc=$?
echo "$rc" > /scratch/runs/scaling-golden/points/nccl-resnet50-b64-n2x4-64a670f481/exitcode
exit "$rc"
