from __future__ import annotations

import os
import socket
import subprocess
import time
from typing import BinaryIO

from hpcbench.plan.checks import time_seconds
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import PointPaths, atomic_write_text
from hpcbench.submit.backends.base import Backend
from hpcbench.submit.launch import rank_argv

# Variables that would make a rank believe it belongs to some other job or launcher.
_FOREIGN_PREFIXES = ("SLURM_", "SLURMD_", "OMPI_", "PMI_", "PMIX_", "MASTER_", "RANK", "LOCAL_RANK", "WORLD_SIZE")

GRACE_S = 30  # after the first rank fails, how long the others get to fail on their own


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_environments(spec: SweepSpec, point: Point, job_id: str) -> list[dict[str, str]]:
    """The environment srun would give each rank, for ranks started on this machine."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_PREFIXES)}
    host = socket.gethostname()
    base.update({
        "NCCL_DEBUG": "INFO",
        "OMP_NUM_THREADS": str(spec.slurm.cpus_per_task),
        **dict(spec.slurm.env),
        "HPCBENCH_JOB_ID": job_id,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "SLURM_NTASKS": str(point.world_size),
        "SLURM_NNODES": str(point.nodes),
        "SLURM_JOB_NUM_NODES": str(point.nodes),
        "SLURM_NTASKS_PER_NODE": str(point.ranks_per_node),
        "SLURM_CPUS_PER_TASK": str(spec.slurm.cpus_per_task),
        "SLURM_JOB_NODELIST": host,
    })
    envs = []
    for rank in range(point.world_size):
        env = dict(base)
        env.update({"SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank % point.ranks_per_node),
                    "SLURM_NODEID": str(rank // point.ranks_per_node)})
        envs.append(env)
    return envs


class LocalBackend(Backend):
    """Run every rank on this machine, one point after another. No scheduler needed."""

    name = "local"
    queued = False

    def __init__(self) -> None:
        self._count = 0

    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> str:
        self._count += 1
        job_id = f"local{os.getpid()}-{self._count}"
        argv = rank_argv(point, str(paths.dir), python)
        limit = time_seconds(spec.slurm.time)
        with open(paths.stdout(job_id), "ab") as out, open(paths.stderr(job_id), "ab") as err:
            procs = [subprocess.Popen(argv, env=env, stdout=out, stderr=err, cwd=paths.dir)
                     for env in rank_environments(spec, point, job_id)]
            rc = _wait_all(procs, limit, err)
        atomic_write_text(paths.exitcode, f"{rc}\n")
        return job_id


def _wait_all(procs: list[subprocess.Popen[bytes]], limit_s: float, err: BinaryIO) -> int:
    """Wait for every rank. Like a job step: first failure wins; the time limit kills everything."""
    deadline = time.monotonic() + limit_s
    failed_at = None
    rc = 0
    while any(p.poll() is None for p in procs):
        now = time.monotonic()
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
