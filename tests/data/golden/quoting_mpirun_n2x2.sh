#!/bin/bash
# hpcbench job script: point gloo-mnist_cnn-b32-n2x2 (5aa65fcd02) of sweep quoting.
# Rendered by hpcbench 0.1.0. Submit it by hand with: sbatch /scratch/runs/scaling-golden/points/gloo-mnist_cnn-b32-n2x2-5aa65fcd02/job.sh
#SBATCH --job-name=hpcb-quoting-gloo-mnist_cnn-b32-n2x2
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
# A node failure must end the job as NODE_FAIL with its logs, not rerun it from scratch over them.
#SBATCH --no-requeue
#SBATCH --time=00:30:00
#SBATCH --partition='cpu nodes'
#SBATCH --account='proj;rm -rf /'
#SBATCH --output=/scratch/runs/scaling-golden/points/gloo-mnist_cnn-b32-n2x2-5aa65fcd02/job-%j.out
#SBATCH --error=/scratch/runs/scaling-golden/points/gloo-mnist_cnn-b32-n2x2-5aa65fcd02/job-%j.err
#SBATCH '--constraint=a100&ib'

set -uo pipefail

if ! type module >/dev/null 2>&1; then
    for f in /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash /etc/profile.d/modules.sh; do
        if [ -r "$f" ]; then set +u; . "$f"; set -u; break; fi
    done
fi
set -e  # a module that does not load must stop the job before it runs in the wrong environment
module load 'openmpi/4.1 '
module load 'py$(whoami)'
set +e

export NCCL_DEBUG=INFO
export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"
export SAFE='it'"'"'s $HOME and `id`'

cd /scratch/runs/scaling-golden/points/gloo-mnist_cnn-b32-n2x2-5aa65fcd02
mpirun -np 4 --map-by socket --bind-to socket -x NCCL_DEBUG \
    /opt/hpcbench/bin/python -u -m hpcbench.workloads.train \
    --out /scratch/runs/scaling-golden/points/gloo-mnist_cnn-b32-n2x2-5aa65fcd02 \
    --point-id 5aa65fcd02 \
    --label gloo-mnist_cnn-b32-n2x2 \
    --framework ddp \
    --backend gloo \
    --model mnist_cnn \
    --batch-size 32 \
    --nodes 2 \
    --ranks-per-node 2 \
    --device cpu \
    --data synthetic \
    --steps 20 \
    --warmup-steps 5 \
    --lr 0.01
rc=$?
echo "$rc" > /scratch/runs/scaling-golden/points/gloo-mnist_cnn-b32-n2x2-5aa65fcd02/exitcode
exit "$rc"
