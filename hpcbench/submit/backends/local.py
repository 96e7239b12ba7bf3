"""The local backend: every rank on this machine, one point after another; no scheduler needed.

It runs what it is given or refuses it before the start: a point that needs a GPU this machine
does not have is refused at plan time, and Horovod over MPI starts under mpirun, as the job script
would start it, since only an MPI launcher can wire up its ranks.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import BinaryIO

from hpcbench.errors import ConfigError
from hpcbench.files import atomic_write_text
from hpcbench.jobs import Job
from hpcbench.plan.checks import time_seconds
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import PointPaths
from hpcbench.submit.backends.base import Backend
from hpcbench.submit.launch import horovod_mpi, rank_argv

# Variables that would make a rank believe it belongs to some other job or launcher.
_FOREIGN_PREFIXES = ("SLURM_", "SLURMD_", "OMPI_", "PMI_", "PMIX_", "MASTER_", "RANK", "LOCAL_RANK", "WORLD_SIZE")
# ... but the user's own OpenMPI settings (root permission, MCA parameters) are for mpirun to read.
_KEEP = ("OMPI_MCA_", "OMPI_ALLOW_RUN_AS_ROOT")

GRACE_S = 30  # after the first rank fails, how long the others get to fail on their own


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_environments(spec: SweepSpec, point: Point, job_id: str) -> list[dict[str, str]]:
    """The environment srun would give each rank, for ranks started on this machine."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_PREFIXES) or k.startswith(_KEEP)}
    host = socket.gethostname()
    slurm = point.settings(spec.slurm)  # the sweep's [slurm], with the point's own axes (its env included)
    base.update({
        "NCCL_DEBUG": "INFO",
        "OMP_NUM_THREADS": str(slurm.cpus_per_task),
        **dict(slurm.env),
        "HPCBENCH_JOB_ID": job_id,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "SLURM_NTASKS": str(point.world_size),
        "SLURM_NNODES": str(point.nodes),
        "SLURM_JOB_NUM_NODES": str(point.nodes),
        "SLURM_NTASKS_PER_NODE": str(point.ranks_per_node),
        "SLURM_CPUS_PER_TASK": str(slurm.cpus_per_task),
        "SLURM_JOB_NODELIST": host,
    })
    envs = []
    for rank in range(point.world_size):
        env = dict(base)
        env.update({"SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank % point.ranks_per_node),
                    "SLURM_NODEID": str(rank // point.ranks_per_node)})
        envs.append(env)
    return envs


def mpi_launched(point: Point) -> bool:
    """Horovod's MPI controller needs an MPI launcher to start its ranks (one rank can start alone)."""
    return horovod_mpi(point) and point.world_size > 1


class LocalBackend(Backend):
    """Run every rank on this machine, one point after another. No scheduler needed."""

    queued = False
    auto_rank = 0  # runs anywhere: --backend auto's last choice

    def __init__(self) -> None:
        self._count = 0

    def check(self, spec: SweepSpec) -> None:
        super().check(spec)
        if spec.workload.device == "cuda":
            from hpcbench.plan.limits import probe

            caps = probe(spec.slurm.python or sys.executable, dict(os.environ))
            if caps is not None and caps.cuda_devices < 1:
                raise ConfigError(f"{spec.path}: workload.device = \"cuda\", but the local backend runs every rank "
                                  "on this machine and torch sees no GPU here",
                                  hint='use device = "cpu" (ranks_per_node instead of gpus_per_node), or submit to '
                                       "Slurm with --backend sbatch")

    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> Job:
        self._count += 1
        job_id = f"local{os.getpid()}-{self._count}"
        argv = rank_argv(point, str(paths.dir), python)
        envs = rank_environments(spec, point, job_id)
        with open(paths.stdout(job_id), "ab") as out, open(paths.stderr(job_id), "ab") as err:
            if mpi_launched(point):  # one mpirun starts every rank; OpenMPI's variables tell each its rank
                common = {k: v for k, v in envs[0].items() if not k.startswith(("SLURM_PROCID", "SLURM_LOCALID",
                                                                                  "SLURM_NODEID"))}
                if os.geteuid() == 0:  # containers run as root; mpirun refuses that unless told twice
                    common.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
                mpirun = ["mpirun", "-np", str(point.world_size), "--oversubscribe", "--bind-to", "none"]
                procs = [subprocess.Popen([*mpirun, *argv], env=common, stdout=out, stderr=err, cwd=paths.dir)]
            else:
                procs = [subprocess.Popen(argv, env=env, stdout=out, stderr=err, cwd=paths.dir) for env in envs]
            rc = _wait_all(procs, time_seconds(point.settings(spec.slurm).time), err, self.on_tick)
        atomic_write_text(paths.exitcode, f"{rc}\n")
        return self.job(job_id, paths)


def _wait_all(procs: list[subprocess.Popen[bytes]], limit_s: float, err: BinaryIO,
              on_tick: Callable[[float], None] | None = None) -> int:
    """Wait for every rank. Like a job step: first failure wins; the time limit kills everything."""
    start = time.monotonic()
    deadline, ticked = start + limit_s, 0
    failed_at = None
    rc = 0
    while any(p.poll() is None for p in procs):
        now = time.monotonic()
        if on_tick is not None and now - start >= ticked + 1:
            ticked = int(now - start)
            on_tick(now - start)
        codes = [p.returncode for p in procs if p.returncode not in (None, 0)]
        if codes and failed_at is None:
            failed_at, rc = now, codes[0]
        if now > deadline or (failed_at is not None and now - failed_at > GRACE_S):
            for p in procs:
                if p.poll() is None:
                    p.kill()
            if now > deadline:
                err.write(b"hpcbench local: time limit reached, ranks killed\n")
                return 124
            break
        time.sleep(0.05)
    for p in procs:
        p.wait()
    return rc or next((p.returncode for p in procs if p.returncode != 0), 0)
