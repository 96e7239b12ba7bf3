#!/bin/bash
# hpcbench job script: point hvd-mpi-mlp-b32-n1x2 (1267837695) of sweep lab.
# Rendered by hpcbench 0.1.0. Submit it by hand with: sbatch /tmp/e25/lab/run/points/hvd-mpi-mlp-b32-n1x2-1267837695/job.sh
#SBATCH --job-name=hpcb-lab-hvd-mpi-mlp-b32-n1x2
#SBATCH --comment=hpcbench:672a4bd4ab5f:1267837695
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
# A node failure must end the job as NODE_FAIL with its logs, not rerun it from scratch over them.
#SBATCH --no-requeue
#SBATCH --time=00:05:00
#SBATCH --partition=debug
#SBATCH --output=/tmp/e25/lab/run/points/hvd-mpi-mlp-b32-n1x2-1267837695/job-%j.out
#SBATCH --error=/tmp/e25/lab/run/points/hvd-mpi-mlp-b32-n1x2-1267837695/job-%j.err

set -uo pipefail

if ! type module >/dev/null 2>&1; then
    for f in /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash /etc/profile.d/modules.sh; do
        if [ -r "$f" ]; then set +u; . "$f"; set -u; break; fi
    done
fi
set -e  # a module that does not load must stop the job before it runs in the wrong environment
module use /work/wt/explain25/modules
module load hpcbench
set +e

export NCCL_DEBUG=INFO
export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"
export NCCL_SOCKET_IFNAME=lo
export GLOO_SOCKET_IFNAME=lo
export OMPI_MCA_btl='^vader'
export OMPI_MCA_mpi_yield_when_idle=1

cd /tmp/e25/lab/run/points/hvd-mpi-mlp-b32-n1x2-1267837695
srun --ntasks=2 --ntasks-per-node=2 --mpi=pmix --cpu-bind=sockets \
    /work/main/.venv/bin/python -u -m hpcbench.workloads.train \
    --out /tmp/e25/lab/run/points/hvd-mpi-mlp-b32-n1x2-1267837695 \
    --point-id 1267837695 \
    --label hvd-mpi-mlp-b32-n1x2 \
    --framework horovod \
    --backend mpi \
    --model mlp \
    --batch-size 32 \
    --nodes 1 \
    --ranks-per-node 2 \
    --device cpu \
    --data synthetic \
    --steps 10 \
    --warmup-steps 2 \
    --lr 0.01
rc=$?
echo "$rc" > /tmp/e25/lab/run/points/hvd-mpi-mlp-b32-n1x2-1267837695/exitcode
exit "$rc"
