"""pack = true: many small points as ``srun`` steps inside one allocation of the largest node count.

Each point keeps its own folder, logs, exit status and result record, so status, summarize and
resubmit treat it as if it were a job of its own; the ledger names the shared job id and the pack.
One allocation instead of one per point saves the scheduler's queue wait and start-up per point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hpcbench import __version__
from hpcbench.errors import ConfigError, SchedulerError
from hpcbench.files import atomic_write_text
from hpcbench.plan.checks import time_seconds, time_text
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.rundir import RunDir
from hpcbench.submit.backends.base import Backend
from hpcbench.submit.launch import EnvVar, LaunchPlan, job_env, need_srun_steps, plan_launch
from hpcbench.submit.render import gpu_request, sanitise_job_name, setup_lines, template


@dataclass(frozen=True)
class Packed:
    """What submitting one pack did: its job id (None: sbatch refused it) and how many points it holds."""

    job_id: str | None
    points: int


def _step_argv(rd: RunDir, p: Point, plan: LaunchPlan, exported: tuple[EnvVar, ...]) -> list[str]:
    paths = rd.point(p)
    # A step uses only the nodes it needs; its output goes to the point's own folder, named by job id.
    srun = ["srun", f"--nodes={plan.nodes}", f"--output={paths.stdout()}", f"--error={paths.stderr()}",
            *plan.words.srun_tasks, *plan.words.srun_options]
    # A point's own environment variables ([matrix.env]) reach its step's ranks only: srun passes them on.
    exports = [f"{v.name}={v.value}" for v in plan.env if v not in exported]
    return (["env", *exports] if exports else []) + srun + list(plan.rank_argv)


def render_pack(spec: SweepSpec, rd: RunDir, n: int, points: list[Point], python: str) -> str:
    plans = [plan_launch(spec, p, str(rd.point(p).dir), python) for p in points]
    need_srun_steps(spec, plans, "slurm.pack = true (job steps)", hint="set pack = false to use mpirun")
    own = sorted({k for p in points for k, _ in (*p.slurm, *p.job)})
    if own:  # one allocation has one time limit, one cpus-per-task, ...
        raise ConfigError(f"{spec.path}: slurm.pack = true runs every point in one allocation, but the sweep's "
                          f"points set their own {', '.join(own)}", hint="set pack = false for such axes")
    env = job_env(spec.slurm)  # exported once for every step
    steps = [{"label": p.label, "id": p.id, "dir": rd.point(p).dir, "exitcode": rd.point(p).exitcode,
              "argv": _step_argv(rd, p, plan, env)} for p, plan in zip(points, plans)]
    # The steps run one after another, so the allocation needs the sum of their limits.
    total = time_seconds(spec.slurm.time) * len(points)
    gpus = max(p.gpus_per_node for p in points)
    return template("pack.sh.j2").render(
        n=n, sweep_name=spec.sweep.name, version=__version__, steps=steps, slurm=spec.slurm,
        script=rd.pack_script(n), stdout=rd.pack_stdout(n), comment=rd.job_comment(f"pack-{n}"),
        job_name=sanitise_job_name(f"hpcb-{spec.sweep.name}-pack-{n}"),
        nodes=max(p.nodes for p in points), ranks_per_node=max(p.ranks_per_node for p in points),
        gpus_per_node=gpus, gpu_request=gpu_request(spec.slurm, gpus), setup=setup_lines(spec.slurm, env),
        time=time_text(total),
    )


def submit_pack(spec: SweepSpec, rd: RunDir, points: list[Point], python: str, backend: Backend,
                echo: Callable[[str], None]) -> Packed:
    """Render and submit one pack of ``points``; record every point as submitted under the pack's job id."""
    rd.packs_root.mkdir(parents=True, exist_ok=True)
    n = len(list(rd.packs_root.glob("pack-*.sh"))) + 1
    script = rd.pack_script(n)
    atomic_write_text(script, render_pack(spec, rd, n, points, python), 0o777)
    name = f"pack-{n}"
    for p in points:
        rd.record("submitting", p.id, backend=backend.name, pack=name)
    try:
        job_id = backend.submit_script(script).id
    except SchedulerError as e:
        for p in points:
            rd.record("submit_failed", p.id, backend=backend.name, pack=name, reason=str(e))
        echo(f"  {name} ({len(points)} points): NOT submitted: {e}")
        return Packed(None, len(points))
    for p in points:
        rd.record("submitted", p.id, job_id=job_id, backend=backend.name, pack=name)
    echo(f"  {name}: job {job_id} runs {len(points)} points as job steps")
    return Packed(job_id, len(points))
