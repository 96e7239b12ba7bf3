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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import BinaryIO

from hpcbench.errors import ConfigError
from hpcbench.files import atomic_write_text
from hpcbench.jobs import Job
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import PointPaths
from hpcbench.submit.backends.base import Backend
from hpcbench.submit.launch import LaunchPlan, plan_launch
from hpcbench.submit.registry import use

# Variables that would make a rank believe it belongs to some other job or launcher.
_FOREIGN_PREFIXES = ("SLURM_", "SLURMD_", "OMPI_", "PMI_", "PMIX_", "MASTER_", "RANK", "LOCAL_RANK", "WORLD_SIZE")
# ... but the user's own OpenMPI settings (root permission, MCA parameters) are for mpirun to read.
_KEEP = ("OMPI_MCA_", "OMPI_ALLOW_RUN_AS_ROOT")
# One host, its cores shared by every rank: no binding, and more ranks than cores allowed.
MPIRUN_OPTIONS = ("--oversubscribe", "--bind-to", "none")

GRACE_S = 30  # after the first rank fails, how long the others get to fail on their own


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Here:
    """What the local backend takes from this machine: the caller's environment, its name, a free port, root."""

    environ: Mapping[str, str]
    host: str
    port: int
    root: bool

    @classmethod
    def now(cls) -> Here:
        return cls(dict(os.environ), socket.gethostname(), free_port(), os.geteuid() == 0)


@dataclass(frozen=True)
class Start:
    """One process the local backend starts: its argv and environment (the cwd is the plan's workdir)."""

    argv: tuple[str, ...]
    env: dict[str, str]


def local_starts(plan: LaunchPlan, job_id: str, here: Here) -> list[Start]:
    """The local backend's rendering of a launch plan: every rank on this machine, started directly with the
    environment srun would give it, or, for ranks that only an MPI launcher can wire up, by one mpirun. Every way
    this differs from the plan's ranks on Slurm is here, each with why."""
    inherited = {k: v for k, v in here.environ.items() if not k.startswith(_FOREIGN_PREFIXES) or k.startswith(_KEEP)}
    own = {
        "HPCBENCH_JOB_ID": job_id,  # no Slurm job id: the records' job id, and distenv's
        "MASTER_ADDR": "127.0.0.1",  # every rank is on this host
        "MASTER_PORT": str(here.port),  # a port free here, not one derived from a Slurm job id
        "SLURM_JOB_NODELIST": here.host,  # the one node, as Slurm would name it
    }
    if plan.needs_mpi and plan.world_size > 1:  # one mpirun starts every rank; OpenMPI's variables tell each its rank
        # Containers run as root; mpirun refuses that unless told twice.
        root = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"} if here.root else {}
        env = {**inherited, **plan.step_env(), **own, **root}
        return [Start(("mpirun", "-np", str(plan.world_size), *MPIRUN_OPTIONS, *plan.rank_argv), env)]
    return [Start(plan.rank_argv, {**inherited, **plan.rank_env(rank), **own}) for rank in range(plan.world_size)]


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
                                  hint=", or ".join(filter(None, (
                                      'use device = "cpu" (ranks_per_node instead of gpus_per_node)',
                                      use(lambda b: b.queued and b.auto_rank is not None, "submit with")))))

    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> Job:
        self._count += 1
        job_id = f"local{os.getpid()}-{self._count}"
        plan = plan_launch(spec, point, str(paths.dir), python)
        with open(paths.stdout(job_id), "ab") as out, open(paths.stderr(job_id), "ab") as err:
            procs = [subprocess.Popen(s.argv, env=s.env, stdout=out, stderr=err, cwd=plan.workdir)
                     for s in local_starts(plan, job_id, Here.now())]
            rc, timed_out = _wait_all(procs, plan.time_limit_s, err, self.on_tick)
        atomic_write_text(paths.exitcode, f"{rc}\n")
        return self.job(job_id, paths).ran(rc, "time limit reached (local backend)" if timed_out else "")


def _wait_all(procs: list[subprocess.Popen[bytes]], limit_s: float, err: BinaryIO,
              on_tick: Callable[[float], None] | None = None) -> tuple[int, bool]:
    """Wait for every rank. Like a job step: first failure wins; the time limit kills everything.
    (exit code, whether the time limit was reached)."""
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
                return 124, True
            break
        time.sleep(0.05)
    for p in procs:
        p.wait()
    return rc or next((p.returncode for p in procs if p.returncode != 0), 0), False
