from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hpcbench.errors import ConfigError, SchedulerError
from hpcbench.jobs import Job
from hpcbench.plan.checks import time_seconds
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import PointPaths
from hpcbench.submit.backends.base import SlurmQueue
from hpcbench.submit.launch import LaunchPlan, plan_launch
from hpcbench.submit.render import job_name, setup_lines


def run_rank(module: str, argv: list[str]) -> int:
    """Runs in every task of a submitit job: the same workload entry point as the job script's ranks."""
    import importlib

    rc = int(importlib.import_module(module).main(argv))
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
        job = submitit_job(spec, point, plan_launch(spec, point, str(paths.dir), python),
                           self.comment(point.id) if self.comment else None)
        ex = submitit.SlurmExecutor(folder=paths.submitit_dir, max_num_timeout=0, python=job.python)
        ex.update_parameters(**job.params)
        try:
            queued = ex.submit(run_rank, job.module, list(job.argv))
        except Exception as e:  # noqa: BLE001 - submitit wraps sbatch failures in its own types
            raise SchedulerError(f"submitit could not submit {point.label}: {str(e).strip().splitlines()[-1]}") from None
        return self.job(str(queued.job_id), paths)


@dataclass(frozen=True)
class SubmititJob:
    """What the submitit backend hands submitit for one point: the interpreter, the executor's parameters, and
    run_rank's arguments (each task runs the workload module's main(argv) in submitit's own process)."""

    python: str
    params: dict[str, Any]
    module: str
    argv: tuple[str, ...]


def submitit_job(spec: SweepSpec, point: Point, plan: LaunchPlan, comment: str | None) -> SubmititJob:
    """The launch plan rendered for submitit, without submitit: its srun line takes the task counts from sbatch's
    --nodes and --ntasks-per-node, and the plan's srun options by name."""
    return SubmititJob(plan.python, executor_parameters(spec, point, plan, comment), plan.module, plan.rank_args)


def executor_parameters(spec: SweepSpec, point: Point, plan: LaunchPlan, comment: str | None) -> dict[str, Any]:
    """SlurmExecutor's parameters for the point: its sbatch settings, the plan's set-up lines and srun options."""
    s = point.settings(spec.slurm)  # the sweep's [slurm], with the point's own axes
    params: dict[str, Any] = {
        "job_name": job_name(spec, point),
        "nodes": plan.nodes,
        "ntasks_per_node": plan.ranks_per_node,
        "cpus_per_task": plan.cpus_per_task,
        "time": max(1, math.ceil(time_seconds(s.time) / 60)),
        "setup": [line for line in setup_lines(s, plan.env) if line],
        "srun_args": list(plan.srun_options),
        # The comment names run and point, so a re-run finds jobs whose id was never recorded.
        "additional_parameters": {**_sbatch_args(s.sbatch_args), **({"comment": comment} if comment else {})},
    }
    for key in ("partition", "account", "qos", "mem"):
        if getattr(s, key):
            params[key] = getattr(s, key)
    if point.gpus_per_node and s.gres:
        params["gres"] = s.gres.format(gpus=point.gpus_per_node)
    elif point.gpus_per_node:
        params["gpus_per_node"] = point.gpus_per_node
    return params
