from __future__ import annotations

import math
from typing import Any

from hpcbench.errors import ConfigError, SchedulerError
from hpcbench.jobs import Job
from hpcbench.plan.checks import time_seconds
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import PointPaths
from hpcbench.submit.backends.base import SlurmQueue
from hpcbench.submit.launch import launcher_argv, rank_args
from hpcbench.submit.render import job_name, setup_lines
from hpcbench.workloads.config import MODULE


def run_rank(kind: str, argv: list[str]) -> int:
    """Runs in every task of a submitit job: the same workload entry point as the job script's ranks."""
    import importlib

    rc = int(importlib.import_module(MODULE[kind]).main(argv))
    if rc != 0:
        # Makes submitit see the failure too; the reason is already in error-rank<N>.json.
        raise SystemExit(rc)
    return rc


def _sbatch_args(args: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in args:
        key, eq, value = a[2:].partition("=")
        out[key.replace("-", "_")] = value if eq else True
    return out


class SubmititBackend(SlurmQueue):
    """Submit through submitit's SlurmExecutor: srun starts one task per rank, each calls run_rank()."""

    def check(self, spec: SweepSpec) -> None:
        super().check(spec)
        where = spec.matrix.where("launcher") or "slurm.launcher"
        for launcher in dict(spec.matrix.axes).get("launcher", (spec.slurm.launcher,)):
            if launcher != "srun":
                raise ConfigError(f"{spec.path}: {where}: {launcher!r} cannot be used with --backend submitit",
                                  hint="submitit always starts ranks with srun; use --backend sbatch for mpirun")

    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> Job:
        try:
            import submitit
        except ImportError:
            raise SchedulerError("submitit is not installed", hint="pip install submitit, or use --backend sbatch") from None
        s = point.settings(spec.slurm)  # the sweep's [slurm], with the point's own axes (its env included)
        ex = submitit.SlurmExecutor(folder=paths.submitit_dir, max_num_timeout=0, python=python)
        setup = [line for line in setup_lines(s) if line]
        # The job script's srun line less its first three words (srun and the task counts, which submitit sets).
        srun = launcher_argv(point, s, python)
        params: dict[str, Any] = {
            "job_name": job_name(spec, point),
            "nodes": point.nodes,
            "ntasks_per_node": point.ranks_per_node,
            "cpus_per_task": s.cpus_per_task,
            "time": max(1, math.ceil(time_seconds(s.time) / 60)),
            "setup": setup,
            # The job script's srun flags (--mpi, --cpu-bind, launcher_args); submitit sets the task counts.
            "srun_args": srun[3:],
            # The comment names run and point, so a re-run finds jobs whose id was never recorded.
            "additional_parameters": {**_sbatch_args(s.sbatch_args),
                                      **({"comment": self.comment(point.id)} if self.comment else {})},
        }
        for key in ("partition", "account", "qos", "mem"):
            if getattr(s, key):
                params[key] = getattr(s, key)
        if point.gpus_per_node and s.gres:
            params["gres"] = s.gres.format(gpus=point.gpus_per_node)
        elif point.gpus_per_node:
            params["gpus_per_node"] = point.gpus_per_node
        ex.update_parameters(**params)
        try:
            job = ex.submit(run_rank, point.kind, rank_args(point, str(paths.dir)))
        except Exception as e:  # noqa: BLE001 - submitit wraps sbatch failures in its own types
            raise SchedulerError(f"submitit could not submit {point.label}: {str(e).strip().splitlines()[-1]}") from None
        return self.job(str(job.job_id), paths)


