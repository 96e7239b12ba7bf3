from __future__ import annotations

import math
import sys
from typing import Any

from hpcbench.errors import SchedulerError
from hpcbench.jobs import Job
from hpcbench.plan.expand import Point, expand
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import PointPaths
from hpcbench.submit.backends.base import SlurmQueue
from hpcbench.submit.launch import LaunchPlan, need_srun_steps, plan_launch
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
        firsts: dict[tuple[tuple[str, object], ...], Point] = {}  # a point per value of the [slurm] axes (launcher)
        for point in expand(spec):
            firsts.setdefault(point.slurm, point)
        plans = (plan_launch(spec, p, ".", sys.executable) for p in firsts.values())
        need_srun_steps(spec, plans, "--backend submitit",
                        hint="submitit always starts ranks with srun; use --backend sbatch for mpirun")

    def submit(self, spec: SweepSpec, point: Point, paths: PointPaths, python: str) -> Job:
        try:
            import submitit
        except ImportError:
            raise SchedulerError("submitit is not installed", hint="pip install submitit, or use --backend sbatch") from None
        plan = plan_launch(spec, point, str(paths.dir), python)
        # Each task runs submitit's entry point in the plan's python, which calls run_rank: the plan's rank command.
        ex = submitit.SlurmExecutor(folder=paths.submitit_dir, max_num_timeout=0, python=plan.python)
        ex.update_parameters(**executor_parameters(spec, point, plan, self.comment(point.id) if self.comment else None))
        try:
            queued = ex.submit(run_rank, plan.module, list(plan.rank_args))
        except Exception as e:  # noqa: BLE001 - submitit wraps sbatch failures in its own types
            raise SchedulerError(f"submitit could not submit {point.label}: {str(e).strip().splitlines()[-1]}") from None
        return self.job(str(queued.job_id), paths)


def executor_parameters(spec: SweepSpec, point: Point, plan: LaunchPlan, comment: str | None) -> dict[str, Any]:
    """The launch plan rendered for submitit's SlurmExecutor, without submitit: the plan's sbatch settings and set-up
    lines; its srun line takes the task counts from sbatch's --nodes and --ntasks-per-node, then the plan's srun
    options."""
    s = plan.settings
    params: dict[str, Any] = {
        "job_name": job_name(spec, point),
        "nodes": plan.nodes,
        "ntasks_per_node": plan.ranks_per_node,
        "cpus_per_task": s.cpus_per_task,
        "time": max(1, math.ceil(plan.time_limit_s / 60)),
        "setup": [line for line in setup_lines(s, plan.env) if line],
        "srun_args": list(plan.words.srun_options),
        # The comment names run and point, so a re-run finds jobs whose id was never recorded.
        "additional_parameters": {**_sbatch_args(s.sbatch_args), **({"comment": comment} if comment else {})},
    }
    for key in ("partition", "account", "qos", "mem"):
        if getattr(s, key):
            params[key] = getattr(s, key)
    if s.exclude:
        params["exclude"] = ",".join(s.exclude)
    if plan.gpus_per_node and s.gres:
        params["gres"] = s.gres.format(gpus=plan.gpus_per_node)
    elif plan.gpus_per_node:
        params["gpus_per_node"] = plan.gpus_per_node
    return params
